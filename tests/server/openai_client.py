# SPDX-License-Identifier: MIT
"""The openai package (PyPI) as a client of `servelab serve`: completions and
chat completions, streamed and not, usage in the last chunk, and the errors
the package raises for a bad request and a wrong key.

Usage: openai_client.py BASE_URL API_KEY MODEL
"""
import sys

import openai

base_url, api_key, model = sys.argv[1:4]
client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=20, max_retries=0)
failures = []


def check(name, ok):
    print(("ok   " if ok else "FAIL ") + name)
    if not ok:
        failures.append(name)


check("models.list names the model", [m.id for m in client.models.list()] == [model])

whole = client.completions.create(model=model, prompt="Prefill and decode", max_tokens=8, temperature=0)
stream = client.completions.create(model=model, prompt="Prefill and decode", max_tokens=8, temperature=0,
                                   stream=True, stream_options={"include_usage": True})
text, usage = "", None
for chunk in stream:
    if chunk.choices:
        text += chunk.choices[0].text
    if chunk.usage:
        usage = chunk.usage
check("completion: streamed text == non-streamed text", text == whole.choices[0].text)
check("completion: usage in the last chunk", usage is not None and usage.completion_tokens == whole.usage.completion_tokens)

messages = [{"role": "user", "content": "KV 캐시가 뭐예요?"}]
chat = client.chat.completions.create(model=model, messages=messages, max_tokens=16, temperature=0)
parts = client.chat.completions.create(model=model, messages=messages, max_tokens=16, temperature=0, stream=True)
streamed = "".join(c.choices[0].delta.content or "" for c in parts if c.choices)
check("chat: streamed content == non-streamed content", streamed == chat.choices[0].message.content)
check("chat: 73 prompt tokens (the ChatML prompt)", chat.usage.prompt_tokens == 73)

try:
    client.completions.create(model=model, prompt="x", max_tokens=0)
    check("max_tokens 0 raises BadRequestError", False)
except openai.BadRequestError as e:
    check("max_tokens 0 raises BadRequestError", e.status_code == 400)
try:
    client.completions.create(model="gpt-4", prompt="x", max_tokens=1)
    check("an unknown model raises NotFoundError", False)
except openai.NotFoundError:
    check("an unknown model raises NotFoundError", True)
try:
    openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0).models.list()
    check("a wrong key raises AuthenticationError", False)
except openai.AuthenticationError:
    check("a wrong key raises AuthenticationError", True)

sys.exit(1 if failures else 0)
