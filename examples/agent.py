"""Lethe in your own agent: recall before answering, remember after, hygiene in the background.
Run: OPENAI_API_KEY=... python examples/agent.py   (or OPENAI_BASE_URL=http://localhost:8080/v1)
Type a message a line; Ctrl-D ends."""
import sys

from openai import OpenAI

from engine import Memory, Scheduler

mem = Memory("agent.db", policy="lifecycle", offline=True)  # offline: the built-in rules judge
client = OpenAI()  # reads OPENAI_API_KEY / OPENAI_BASE_URL
with Scheduler(mem, interval=3600):  # decay, expiry and compression, each on its schedule
    for user in filter(None, map(str.strip, sys.stdin)):
        known = "\n".join(f"- {m.content}" for m in mem.recall(user)) or "(nothing yet)"
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=[
            {"role": "system", "content": f"What you remember about the user:\n{known}"},
            {"role": "user", "content": user}])
        answer = reply.choices[0].message.content
        print(f"assistant> {answer}", flush=True)
        mem.remember(user, answer)  # judged; supersedes what it replaces, reinforces what it confirms
mem.close()
