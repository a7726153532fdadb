"""``speculative`` in a simulate config or a search spec: validated at the edge."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from estimators import SpeculativeConfig, load_model

__all__ = ["SpeculativeSpec"]


class SpeculativeSpec(BaseModel):
    """Speculative decoding: a drafter proposes tokens, the model verifies them in one step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["mtp", "eagle", "draft"] = Field(
        "mtp",
        description="mtp or eagle: draft_layers decoder layers of the model's shape draft "
        "(DeepSeek's MTP module, EAGLE heads); draft: a separate draft_model.  The drafter "
        "also runs over every prompt chunk (its own prefill).",
    )
    num_speculative_tokens: PositiveInt = Field(
        1,
        le=16,
        description="Tokens proposed per step (k); the model verifies k + 1, which count "
        "against the iteration's token budget beside prompt chunks.",
    )
    acceptance_rate: float = Field(
        0.7, ge=0.0, le=1.0,
        description="Probability that a proposed token is accepted, given the ones before "
        "it: a step emits (1 - a^(k+1)) / (1 - a) tokens on average.",
    )  # fmt: skip
    acceptance_rates: list[Annotated[float, Field(ge=0.0, le=1.0)]] | None = Field(
        None,
        description="Acceptance of each proposed position (k values, each given the ones "
        "before it), instead of acceptance_rate: a step emits 1 + sum of their running "
        "products on average.",
    )
    tbt_gaps: Literal["chunk", "token"] = Field(
        "chunk",
        description="How a step's burst of accepted tokens counts in TBT: chunk (one gap per "
        "step, as vllm bench serve and InferenceMAX count ITL: the engines stream a step's "
        "tokens as one chunk) or token (the step's gap, then 0 for the burst's other tokens).",
    )
    draft_layers: PositiveInt = Field(1, le=8, description="Layers of an mtp / eagle drafter.")
    draft_model: str | None = Field(
        None, description="The draft model of method draft (a built-in name or config.json)."
    )

    @field_validator("acceptance_rates", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):  # --acceptance-rates 0.8,0.6,0.4
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("draft_model")
    @classmethod
    def _known_model(cls, value: str | None) -> str | None:
        if value is not None:
            load_model(value)  # raises naming the models there are
        return value

    @model_validator(mode="after")
    def _a_valid_config(self) -> SpeculativeSpec:
        self.config()  # SpeculativeConfig's own checks (draft_model with method draft)
        return self

    def config(self) -> SpeculativeConfig:
        return SpeculativeConfig(
            method=self.method,
            num_speculative_tokens=self.num_speculative_tokens,
            acceptance_rate=self.acceptance_rate,
            draft_layers=self.draft_layers,
            draft_model=self.draft_model,
            acceptance_rates=(
                tuple(self.acceptance_rates) if self.acceptance_rates is not None else None
            ),
            tbt_gaps=self.tbt_gaps,
        )
