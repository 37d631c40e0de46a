"""Lethe in your own agent: recall before answering, remember after, hygiene in the background.

    OPENAI_API_KEY=... python examples/agent.py
    OPENAI_BASE_URL=http://localhost:11434/v1 python examples/agent.py --model llama3.2  # no key
    python examples/agent.py --offline        # no model: it answers with what it recalled

Type a message a line; Ctrl-D ends. A model that fails ends it with one line (the turn kept)."""

import argparse
import os
import sys

import openai

from engine import Memory, Scheduler

ask = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ask.add_argument("--model", default="gpt-4o-mini", help="the chat model (default gpt-4o-mini)")
ask.add_argument("--offline", action="store_true", help="no chat model: answer with what is recalled")
ask.add_argument("--db", default="agent.db", help="the memory file (default agent.db)")
args = ask.parse_args()
url, key = os.environ.get("OPENAI_BASE_URL"), os.environ.get("OPENAI_API_KEY")
if not (args.offline or url or key):
    sys.exit("agent.py: set OPENAI_API_KEY, or OPENAI_BASE_URL for a local server, or pass --offline")
# a local server (Ollama, llama.cpp's llama-server, vLLM) takes any key
client = None if args.offline else openai.OpenAI(api_key=key or "local", max_retries=1)


def reply(user: str, known: str) -> str:
    if client is None:
        return f"I remember:\n{known}"
    system = {"role": "system", "content": f"What you remember about the user:\n{known}"}
    chat = client.chat.completions.create(
        model=args.model, messages=[system, {"role": "user", "content": user}]
    )
    return chat.choices[0].message.content


mem = Memory(args.db, policy="lifecycle", offline=True)  # offline: the built-in rules judge
with Scheduler(mem, interval=3600):  # decay, expiry and compression, each on its schedule
    for user in filter(None, map(str.strip, sys.stdin)):
        known = "\n".join(f"- {m.content}" for m in mem.recall(user)) or "(nothing yet)"
        try:
            answer = reply(user, known)
        except openai.OpenAIError as exc:  # unreachable, a refused key, an unknown model
            mem.remember(user)
            why = " ".join(str(getattr(exc, "message", exc)).split())
            where = f"{args.model} at {url or 'api.openai.com'}"
            sys.exit(f"agent.py: the model {where} failed: {why} (your message is remembered)")
        print(f"assistant> {answer}", flush=True)
        mem.remember(user, answer)  # judged: supersedes what it replaces, reinforces the rest
mem.close()
