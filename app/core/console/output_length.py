"""How long a test reply may run: the console's and the `prompt` command's default output cap.

A model that never emits its end token (a small one looping on a phrase) otherwise generates until
its context is full, which on a laptop's engine takes minutes. 2,048 tokens hold a thinking model's
trace and answer to the seed prompts (a few hundred to about 1,500 tokens on Qwen3) and a 300-character
essay several times over, and stop a loop after seconds to tens of seconds. No cap stays choosable:
0 in the form and on the command line.
"""

from __future__ import annotations

DEFAULT_NUM_PREDICT = 2048  # tokens, thinking included
NO_CAP = 0  # the form's and the command line's value for "the model's default: no cap"
LENGTH_REASON = "length"  # the stop reason both servers give a reply cut at its cap


def cap_note(num_predict: int | None, stop_reason: str | None, how_to_raise: str) -> str:
    """What to say under a reply cut at its output cap (empty when it was not): `how_to_raise` says where."""
    if stop_reason != LENGTH_REASON or not num_predict:
        return ""
    return f"Stopped at the output cap of {num_predict:,d} tokens (num_predict); {how_to_raise} for a longer reply."


__all__ = ["DEFAULT_NUM_PREDICT", "LENGTH_REASON", "NO_CAP", "cap_note"]
