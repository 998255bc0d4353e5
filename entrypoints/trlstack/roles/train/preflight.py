"""What train checks just before the run starts, once the settings hold: the model the server serves (the
other run in the output folder is run/resume.py's decision)."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.run.settings import TrainSettings


def check_served_model(
    settings: TrainSettings, served: str, trained: str, environ: Mapping[str, str]
) -> None:
    """UsageError, before anything starts, when the server serves another model than the one trained: TRL
    sends every parameter into the served model by name and shape."""
    from trlstack import models

    same, how = models.same_model(served, trained, lambda reference: models.read_config(reference, environ))
    if same:
        if served != trained:
            say(f"the server serves {served} and this run trains {trained}: one model ({how})")
        return
    flag = f"--allow-other-served-model ({Env.ALLOW_OTHER_SERVED_MODEL}=1)"
    if settings.allow_other_served_model:
        say(f"the server serves {served} and this run trains {trained}: allowed by {flag} ({how})")
        return
    raise UsageError(
        f"the vLLM server at {settings.server_url} serves {served}, but this run trains {trained}, and they "
        f"are not recognised as one model ({how}): TRL's first weight sync would fail. Serve and train the "
        f"same model (--model, or {Env.MODEL} in .env for both), or pass {flag} if they are one model under "
        "two names."
    )


def say(message: str) -> None:
    print(f"train: {message}", file=sys.stderr, flush=True)
