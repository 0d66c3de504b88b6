"""server_openai.py BASE KEY — drives a live `specbed serve` with the
official openai package (run by tests/server_openai.sh): completions, chat,
streaming with usage, logprobs (also echoed prompt logprobs), the spec_depth
override, and the errors the package maps to exceptions."""
import sys

import openai

base, key = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=60)
MODEL = "qwen3-tied"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("CHECK failed:", what, file=sys.stderr)


models = client.models.list()
check([m.id for m in models.data] == [MODEL], f"models: {models}")
one = client.models.retrieve(MODEL)
check(one.id == MODEL, f"models.retrieve: {one}")

# completions, plain and streamed
r = client.completions.create(model=MODEL, prompt="int main(void) {", max_tokens=16, temperature=0,
                              extra_body={"ignore_eos": True})
text = r.choices[0].text
check(r.object == "text_completion" and r.choices[0].finish_reason == "length", f"completion: {r}")
check(r.usage.completion_tokens == 16 and r.usage.prompt_tokens > 0, f"usage: {r.usage}")
chunks = list(client.completions.create(model=MODEL, prompt="int main(void) {", max_tokens=16, temperature=0,
                                        stream=True, stream_options={"include_usage": True},
                                        extra_body={"ignore_eos": True}))
check("".join(c.choices[0].text for c in chunks if c.choices) == text, "streamed text differs")
check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 16, f"stream usage: {chunks[-1]}")
check([c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length", "stream finish_reason")

# speculation off / deeper through the API: same greedy text
for depth in (0, 2, 8):
    r2 = client.completions.create(model=MODEL, prompt="int main(void) {", max_tokens=16, temperature=0,
                                   extra_body={"ignore_eos": True, "spec_depth": depth})
    check(r2.choices[0].text == text, f"spec_depth {depth}: {r2.choices[0].text!r} vs {text!r}")

# logprobs, with the prompt echoed
r = client.completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=4, temperature=0, logprobs=2,
                              echo=True, extra_body={"ignore_eos": True})
lp = r.choices[0].logprobs
n = r.usage.prompt_tokens + 4
check(len(lp.tokens) == n and len(lp.token_logprobs) == n and len(lp.text_offset) == n, f"logprobs: {lp}")
check(lp.token_logprobs[0] is None and all(x <= 0 for x in lp.token_logprobs[1:]), "token_logprobs values")
check(all(len(t) <= 2 for t in lp.top_logprobs[1:]), "top_logprobs sizes")
check(r.choices[0].text.startswith("The quick brown fox"), "echo text")

# chat, plain and streamed, with logprobs
msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi."}]
c = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=8, temperature=0, logprobs=True,
                                   top_logprobs=3, extra_body={"ignore_eos": True})
check(c.object == "chat.completion" and c.choices[0].message.role == "assistant", f"chat: {c}")
content = c.choices[0].logprobs.content
check(len(content) == c.usage.completion_tokens == 8, f"chat logprobs: {len(content)} entries")
check(all(len(e.top_logprobs) == 3 and abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6 for e in content),
      "chat top_logprobs")
s = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=8, temperature=0, stream=True,
                                   extra_body={"ignore_eos": True})
parts = [ch.choices[0].delta.content or "" for ch in s if ch.choices]
check("".join(parts) == c.choices[0].message.content, "streamed chat differs")

# seeded sampling is reproducible
a = client.completions.create(model=MODEL, prompt="Once", max_tokens=12, temperature=0.9, top_p=0.95, seed=7)
b = client.completions.create(model=MODEL, prompt="Once", max_tokens=12, temperature=0.9, top_p=0.95, seed=7)
check(a.choices[0].text == b.choices[0].text, "seeded sampling differs")

# errors, as the package sees them
for call, exc in [
        (lambda: client.completions.create(model="gpt-nope", prompt="x", max_tokens=2), openai.NotFoundError),
        (lambda: client.completions.create(model=MODEL, prompt="x", max_tokens=2, n=2), openai.BadRequestError),
        (lambda: client.completions.create(model=MODEL, prompt="", max_tokens=2), openai.BadRequestError),
        (lambda: client.chat.completions.create(model=MODEL, messages=[], max_tokens=2), openai.BadRequestError),
        (lambda: openai.OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0).models.list(),
         openai.AuthenticationError)]:
    try:
        call()
        check(False, f"no {exc.__name__}")
    except exc as e:
        check(isinstance(e.body, dict) and "message" in e.body, f"error body: {e.body}")

if failures:
    print(f"server_openai.py: {len(failures)} check(s) failed")
    sys.exit(1)
print("server_openai.py: ok")
