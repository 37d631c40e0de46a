"""The slow local model of the soak run: an OpenAI-compatible server (tests.helpers.fake_openai)
that answers every judge step of the lifecycle policy sensibly, after a delay.

    python tests/procs/slow_model.py --delay 0.2     # prints its base URL, then serves
    python tests/procs/slow_model.py --faults FILE   # FILE names the fault now on, if any

Gate: save the user's text as it is; confidence 0.8; contradiction: nothing superseded
or confirmed; expiry: none; select: the first three; cluster: the first two together
(so compression merges, with model calls, while runners race and get killed).

With `--faults FILE`, the first word of FILE (read every 0.1 s; missing or empty: none) is
the fault the server shows now: `chat-down` (every chat call a 503), `chat-drop` (the
connection closed without an answer), `embed-down` (/v1/embeddings a 503), `embed-empty`
(a 200 with no vectors), `embed-zero` (all-zero vectors), `embed-size` (vectors of the
wrong size)."""

from __future__ import annotations

import argparse
import json
import re
import signal
import threading

from _common import ROOT  # noqa: F401  (puts the project on sys.path)

from tests.helpers.fake_openai import FakeOpenAI, Reply, prompt_text, word_vector

FAULT = {"now": ""}  # the fault the server shows now (read from --faults)


def chat(request: dict):
    if FAULT["now"] == "chat-down":
        return Reply(status=503, content="the model is down")
    if FAULT["now"] == "chat-drop":
        return Reply(drop=True)
    return answer(request)


def embed(text: str) -> list[float]:
    if FAULT["now"] == "embed-zero":
        return [0.0] * 64
    if FAULT["now"] == "embed-size":
        return word_vector(text, dim=48)
    return word_vector(text)


def watch(path: str, fake: FakeOpenAI, stop: threading.Event) -> None:
    while not stop.wait(0.1):
        try:
            with open(path, encoding="utf-8") as fh:
                words = fh.read().split()
        except OSError:
            words = []
        FAULT["now"] = words[0] if words else ""
        fake.embeddings_down = FAULT["now"] == "embed-down"
        fake.embeddings_empty = FAULT["now"] == "embed-empty"


def answer(request: dict) -> str:
    """Each step's answer, by the keys its json_schema asks for (else by its prompt)."""
    schema = (request.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    keys = set(schema.get("properties", {}))
    prompt = prompt_text(request)

    def asks(key: str) -> bool:
        return key in keys if keys else f'"{key}"' in prompt

    if asks("save"):
        said = re.search(r"^User said: (.*)$", prompt, re.M)
        user = json.loads(said.group(1)) if said else "something"
        return json.dumps({"save": True, "content": user, "summary": user[:100], "tags": [], "importance": 5})
    if asks("confidence"):
        return '{"confidence": 0.8}'
    if asks("supersedes"):
        return '{"supersedes": [], "confirms": []}'
    if asks("expires_at"):
        return '{"expires_at": null}'
    if asks("clusters"):
        return '{"clusters": [[1, 2]]}'
    if asks("ids"):
        return '{"ids": [1, 2, 3]}'
    first = re.search(r'^- (".*")$', prompt, re.M)
    text = json.loads(first.group(1)) if first else "merged"
    return json.dumps({"content": f"{text} (merged)", "summary": text[:100], "tags": []})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--faults", help="a file naming the fault to show now")
    a = ap.parse_args()
    fake = FakeOpenAI(responder=chat, delay=a.delay, embedder=embed).start()
    print(fake.base_url, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if a.faults:
        threading.Thread(target=watch, args=(a.faults, fake, stop), daemon=True).start()
    stop.wait()
    fake.stop()


if __name__ == "__main__":
    main()
