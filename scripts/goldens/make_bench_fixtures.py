#!/usr/bin/env python3
"""make_bench_fixtures.py — writes the small text fixtures the bench tests
parse (tests/fixtures/metrics/, tests/fixtures/workloads/).

They reproduce the servers' real output formats, copied in shape from the
servers' own sources and from logs users posted:
  - vLLM V1 /metrics (prometheus_client text: HELP/TYPE lines, counters with
    the _total suffix, a _created gauge per counter, engine/model_name labels,
    spec_decode_num_accepted_tokens_per_pos_total{position="i"}; two engines
    here, so the parser must sum label sets);
  - llama.cpp server /metrics (llamacpp: prefix, no labels,
    spec_decode_num_drafts_total = verification steps, no per-position counter);
  - specbed serve /metrics (serve/server_metrics.c);
  - SGLang /metrics gauges (sglang:spec_accept_length with rank labels);
  - SGLang scheduler "Decode batch" log lines: the older "Decode batch." form
    (2025-02 logs: no accept len, largest-len, cuda graph), the newer
    "Decode batch," form with accept len / accept rate, the hybrid-model
    variants (SWA: #full token / #swa token; GDN/mamba: mamba num / usage),
    PD-decode fields, SGLANG_LOG_FORWARD_ITERS "[iter]", and lines without
    the timestamp prefix; plus specbed serve's SGLang-shaped line.
Deterministic; no network. Run: python3 scripts/goldens/make_bench_fixtures.py
"""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
M = os.path.join(ROOT, "tests", "fixtures", "metrics")
W = os.path.join(ROOT, "tests", "fixtures", "workloads")


def vllm(drafts, dtoks, acc, pos, gen, running, waiting):
    lab = 'engine="{e}",model_name="Qwen/Qwen3-8B"'
    out = []

    def counter(name, help_, vals, extra=None):
        out.append(f"# HELP vllm:{name}_total {help_}")
        out.append(f"# TYPE vllm:{name}_total counter")
        for e, v in enumerate(vals):
            l = lab.format(e=e) + (extra or "")
            out.append(f"vllm:{name}_total{{{l}}} {float(v)}")
        out.append(f"# HELP vllm:{name}_created {help_}")
        out.append(f"# TYPE vllm:{name}_created gauge")
        for e, _ in enumerate(vals):
            out.append(f"vllm:{name}_created{{{lab.format(e=e)}}} 1.7571234567e+09")

    out.append("# HELP vllm:num_requests_running Number of requests in model execution batches.")
    out.append("# TYPE vllm:num_requests_running gauge")
    for e, v in enumerate(running):
        out.append(f"vllm:num_requests_running{{{lab.format(e=e)}}} {float(v)}")
    out.append("# HELP vllm:num_requests_waiting Number of requests waiting to be processed.")
    out.append("# TYPE vllm:num_requests_waiting gauge")
    for e, v in enumerate(waiting):
        out.append(f"vllm:num_requests_waiting{{{lab.format(e=e)}}} {float(v)}")
    out.append("# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.")
    out.append("# TYPE vllm:kv_cache_usage_perc gauge")
    for e in range(len(running)):
        out.append(f"vllm:kv_cache_usage_perc{{{lab.format(e=e)}}} 0.0421")
    counter("generation_tokens", "Number of generation tokens processed.", gen)
    counter("spec_decode_num_drafts", "Number of spec decoding drafts.", drafts)
    counter("spec_decode_num_draft_tokens", "Number of draft tokens.", dtoks)
    counter("spec_decode_num_accepted_tokens", "Number of accepted tokens.", acc)
    out.append("# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.")
    out.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter")
    for e, per in enumerate(pos):
        for i, v in enumerate(per):
            out.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab.format(e=e)},position="{i}"}} {float(v)}')
    out.append("# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.")
    out.append("# TYPE vllm:time_to_first_token_seconds histogram")
    out.append(f'vllm:time_to_first_token_seconds_bucket{{{lab.format(e=0)},le="0.001"}} 0.0')
    out.append(f'vllm:time_to_first_token_seconds_bucket{{{lab.format(e=0)},le="+Inf"}} 12.0')
    out.append(f'vllm:time_to_first_token_seconds_sum{{{lab.format(e=0)}}} 1.25')
    out.append(f'vllm:time_to_first_token_seconds_count{{{lab.format(e=0)}}} 12.0')
    return "\n".join(out) + "\n"


def llamacpp(drafts, dtoks, acc, pred, proc, deferred):
    rows = [
        ("prompt_tokens_total", "counter", "Number of prompt tokens processed.", 6886),
        ("prompt_seconds_total", "counter", "Prompt process time", 2.90363),
        ("tokens_predicted_total", "counter", "Number of generation tokens processed.", pred),
        ("tokens_predicted_seconds_total", "counter", "Predict process time", 35.4427),
        ("n_decode_total", "counter", "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding", 1200),
        ("n_tokens_max", "counter", "Largest observed sequence length (prompt + generation)", 5016),
        ("spec_decode_num_draft_tokens_total", "counter", "Speculative: Total draft tokens generated", dtoks),
        ("spec_decode_num_accepted_tokens_total", "counter", "Speculative: Total draft tokens accepted by the target model", acc),
        ("spec_decode_num_drafts_total", "counter", "Speculative: Total speculative decoding verification steps", drafts),
        ("prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s", 2371.51),
        ("predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s", 97.8773),
        ("requests_processing", "gauge", "Number of requests processing", proc),
        ("requests_deferred", "gauge", "Number of requests deferred", deferred),
        ("n_busy_slots_per_decode", "gauge", "Average number of busy slots per llama_decode() call", 1.5),
    ]
    out = []
    for name, typ, help_, v in rows:
        out += [f"# HELP llamacpp:{name} {help_}", f"# TYPE llamacpp:{name} {typ}", f"llamacpp:{name} {v}"]
    return "\n".join(out) + "\n"


def specbed(drafts, dtoks, acc, pos, steps, committed, gen, running, waiting):
    out = []

    def head(name, typ, help_):
        out.append(f"# HELP specbed:{name} {help_}")
        out.append(f"# TYPE specbed:{name} {typ}")

    def val(name, typ, help_, v):
        head(name, typ, help_)
        out.append(f"specbed:{name} {v}")

    val("num_requests_running", "gauge", "Number of requests in the running batch (prefilling or decoding).", running)
    val("num_requests_waiting", "gauge", "Number of requests waiting to be admitted.", waiting)
    val("kv_cache_usage_perc", "gauge", "KV-cache usage as a fraction of all pages; 1 means 100 percent.", 0.125)
    val("generation_tokens_total", "counter", "Generation tokens produced.", gen)
    head("request_success_total", "counter", "Finished requests by finish reason.")
    for why, v in (("stop", 3), ("length", 9), ("abort", 0)):
        out.append(f'specbed:request_success_total{{finished_reason="{why}"}} {v}')
    val("spec_decode_num_drafts_total", "counter", "Number of spec decoding drafts (proposals with at least one token).", drafts)
    val("spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens verified.", dtoks)
    val("spec_decode_num_accepted_tokens_total", "counter", "Number of draft tokens accepted.", acc)
    head("spec_decode_num_accepted_tokens_per_pos_total", "counter", "Accepted draft tokens per draft position (0-based).")
    for i, v in enumerate(pos):
        out.append(f'specbed:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {v}')
    val("spec_decode_num_verify_steps_total", "counter", "Sequence verify steps of requests that speculate (accept length = committed / steps).", steps)
    val("spec_decode_num_committed_tokens_total", "counter", "Tokens committed by those verify steps, bonus included.", committed)
    head("time_to_first_token_seconds", "histogram", "Histogram of time to first token in seconds.")
    out.append('specbed:time_to_first_token_seconds_bucket{le="0.01"} 3')
    out.append('specbed:time_to_first_token_seconds_bucket{le="+Inf"} 12')
    out.append("specbed:time_to_first_token_seconds_sum 0.84999999999999998")
    out.append("specbed:time_to_first_token_seconds_count 12")
    return "\n".join(out) + "\n"


SGLANG_METRICS = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="glm",pp_rank="0",tp_rank="0"} 24.0
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{dp_rank="0",engine_type="unified",model_name="glm",pp_rank="0",tp_rank="0"} 631.96
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{dp_rank="0",engine_type="unified",model_name="glm",pp_rank="0",tp_rank="0"} 3.0
# HELP sglang:spec_accept_rate The average acceptance rate of speculative decoding (`accepted tokens / total draft tokens` in batch).
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{dp_rank="0",engine_type="unified",model_name="glm",pp_rank="0",tp_rank="0"} 0.54
# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{dp_rank="0",engine_type="unified",model_name="glm",pp_rank="0",tp_rank="0"} 2.63
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{engine_type="unified",model_name="glm"} 123456.0
"""

# Older SGLang (early 2025): "Decode batch." — no accept len without speculation.
SGLANG_OLD = """[2025-02-27 04:37:27 TP0] Prefill batch. #new-seq: 1, #new-token: 48, #cached-token: 0, cache hit rate: 0.00%, token usage: 0.00, #running-req: 0, #queue-req: 0
[2025-02-27 04:37:29 TP0] Decode batch. #running-req: 8, #token: 67724, token usage: 0.13, gen throughput (token/s): 183.54, #queue-req: 0
[2025-02-27 04:37:29] INFO:     127.0.0.1:41452 - "POST /v1/completions HTTP/1.1" 200 OK
[2025-02-27 04:37:31 TP0] Decode batch. #running-req: 8, #token: 68044, token usage: 0.14, accept len: 3.21, gen throughput (token/s): 183.59, #queue-req: 0
[2025-02-27 04:37:33 TP0] Decode batch. #running-req: 8, #token: 68364, token usage: 0.14, accept len: 1.68, cuda graph: True, gen throughput (token/s): 95.12, #queue-req: 2, 
[2025-03-14 02:16:14 TP0] Decode batch. #running-req: 509, #token: 180776, token usage: 0.43, gen throughput (token/s): 7897.87, largest-len: 0, #queue-req: 0, 
[2025-03-14 02:16:16 TP0] Decode batch. #running-req: 0, #token: 0, token usage: 0.00, accept len: 1.00, gen throughput (token/s): 0.00, #queue-req: 0
"""

# Newer SGLang (mid 2025 on): "Decode batch," with accept rate, hybrid fields, PD, iteration counter.
SGLANG_NEW = """[2026-07-21 15:00:13 TP0 EP0] Prefill batch, #new-seq: 8, #new-token: 54400, #cached-token: 482304, token usage: 0.66, #running-req: 16, #queue-req: 2, #pending-token: 0, npu graph: False, input throughput (token/s): 2793.64
[2026-07-21 15:00:13 TP0 EP0] Decode batch, #running-req: 24, #token: 233600, token usage: 0.66, accept len: 3.05, accept rate: 0.68, npu graph: True, gen throughput (token/s): 239.06, #queue-req: 2
[2026-07-21 15:00:15] INFO:     127.0.0.1:43514 - "POST /generate HTTP/1.1" 200 OK
[2026-07-21 15:00:17 TP0 EP0] Decode batch, #running-req: 23, #token: 227968, token usage: 0.64, accept len: 1.92, accept rate: 0.31, npu graph: True, gen throughput (token/s): 631.96, #queue-req: 3
[2026-07-04 05:01:33 TP0] Decode batch, #running-req: 40, #full token: 350592, full token usage: 0.74, mamba num: 160, mamba usage: 0.80, accept len: 3.13, accept rate: 0.71, npu graph: True, gen throughput (token/s): 155.34, #queue-req: 0
[2026-07-04 05:01:36 TP0] Decode batch, #running-req: 12, #full token: 1200, full token usage: 0.21, #swa token: 800, swa token usage: 0.35, accept len: 2.00, accept rate: 0.50, cuda graph: True, gen throughput (token/s): 88.10, #queue-req: 0, 
[2026-07-04 05:01:38 DP0 TP0] Decode batch [4812], #running-req: 5, #token: 9000, token usage: 0.05, accept len: 2.85, accept rate: 0.61, pre-allocated usage: 0.10, #prealloc-req: 0, #transfer-req: 1, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 412.00, #queue-req: 0, 
Decode batch, #running-req: 3, #token: 600, token usage: 0.01, cuda graph: True, gen throughput (token/s): 77.70, #queue-req: 0
[2026-11-29 18:33:05] Decode batch, #running-req: 8, #token: 1617, token usage: 0.10, accept len: 4.82, accept rate: 0.99, gen throughput (token/s): 741.22, #queue-req: 0
"""

WORKLOAD = [
    {"id": "p-1", "category": "code", "prompt": "def fib(n):", "max_tokens": 16},
    {"question_id": 81, "category": "writing", "turns": ["Compose a short travel blog post.", "Rewrite it with every sentence starting with A."]},
    {"category": "chat", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Hello, who are you?"}]},
    {"id": "copy-1", "category": "copy-n136", "prompt": "Remember this. The passphrase is: amber willow.\n\nfiller\n\nThe passphrase is:",
     "max_tokens": 8, "expected": " amber willow.", "n_back": 136},
]


def write(path, text):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def main():
    os.makedirs(M, exist_ok=True)
    os.makedirs(W, exist_ok=True)
    write(os.path.join(M, "vllm_a.txt"), vllm([100, 50], [300, 150], [180, 60], [[90, 60, 30], [40, 15, 5]], [2000, 900], [3, 1], [0, 2]))
    write(os.path.join(M, "vllm_b.txt"), vllm([200, 150], [600, 450], [360, 160], [[180, 120, 60], [90, 45, 25]], [2500, 1500], [4, 2], [1, 0]))
    write(os.path.join(M, "llamacpp_a.txt"), llamacpp(8, 384, 260, 3469, 1, 0))
    write(os.path.join(M, "llamacpp_b.txt"), llamacpp(28, 1184, 700, 4469, 2, 3))
    write(os.path.join(M, "specbed_a.txt"), specbed(40, 160, 100, [36, 30, 20, 14], 50, 150, 400, 2, 0))
    write(os.path.join(M, "specbed_b.txt"), specbed(140, 560, 400, [130, 110, 90, 70], 150, 550, 1000, 4, 1))
    write(os.path.join(M, "sglang_metrics.txt"), SGLANG_METRICS)
    write(os.path.join(M, "sglang_old.log"), SGLANG_OLD)
    write(os.path.join(M, "sglang_new.log"), SGLANG_NEW)
    write(os.path.join(W, "mixed.jsonl"), "\n".join(json.dumps(r) for r in WORKLOAD) + "\n\n")


if __name__ == "__main__":
    main()
