"""``speculative`` in a simulate config or a search spec: validated at the edge."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from estimators import SpeculativeConfig, load_model

__all__ = ["SpeculativeSpec"]


class SpeculativeSpec(BaseModel):
    """Speculative decoding: a drafter proposes tokens, the model verifies them in one step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["mtp", "eagle", "draft"] = Field(
        "mtp",
        description="mtp or eagle: draft_layers decoder layers of the model's shape draft "
        "(DeepSeek's MTP module, EAGLE heads); draft: a separate draft_model.",
    )
    num_speculative_tokens: PositiveInt = Field(
        1, le=16, description="Tokens proposed per step (k); the model verifies k + 1."
    )
    acceptance_rate: float = Field(
        0.7, ge=0.0, le=1.0,
        description="Probability that a proposed token is accepted, given the ones before "
        "it: a step emits (1 - a^(k+1)) / (1 - a) tokens on average.",
    )  # fmt: skip
    draft_layers: PositiveInt = Field(1, le=8, description="Layers of an mtp / eagle drafter.")
    draft_model: str | None = Field(
        None, description="The draft model of method draft (a built-in name or config.json)."
    )

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
        )
