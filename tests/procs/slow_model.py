"""The slow local model of the soak run: an OpenAI-compatible server (tests.helpers.fake_openai)
that answers every judge step of the lifecycle policy sensibly, after a delay.

    python tests/procs/slow_model.py --delay 0.2     # prints its base URL, then serves

Gate: save the user's text as it is; confidence 0.8; contradiction: nothing superseded
or confirmed; expiry: none; select: the first three; cluster: the first two together
(so compression merges, with model calls, while runners race and get killed)."""

from __future__ import annotations

import argparse
import json
import re
import signal
import threading

from _common import ROOT  # noqa: F401  (puts the project on sys.path)

from tests.helpers.fake_openai import FakeOpenAI, prompt_text


def answer(request: dict) -> str:
    prompt = prompt_text(request)
    if '"save": true or false' in prompt:
        said = re.search(r"^User said: (.*)$", prompt, re.M)
        user = json.loads(said.group(1)) if said else "something"
        return json.dumps({"save": True, "content": user, "summary": user[:100], "tags": [], "importance": 5})
    if '{"confidence":' in prompt:
        return '{"confidence": 0.8}'
    if '"supersedes"' in prompt:
        return '{"supersedes": [], "confirms": []}'
    if '"expires_at"' in prompt:
        return '{"expires_at": null}'
    if '{"ids":' in prompt:
        return '{"ids": [1, 2, 3]}'
    if '"clusters"' in prompt:
        return '{"clusters": [[1, 2]]}'
    first = re.search(r'^- (".*")$', prompt, re.M)
    text = json.loads(first.group(1)) if first else "merged"
    return json.dumps({"content": f"{text} (merged)", "summary": text[:100], "tags": []})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay", type=float, default=0.2)
    a = ap.parse_args()
    fake = FakeOpenAI(responder=answer, delay=a.delay).start()
    print(fake.base_url, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    fake.stop()


if __name__ == "__main__":
    main()
