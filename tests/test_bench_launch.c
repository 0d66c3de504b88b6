/* label: bench */
/* test_bench_launch.c — the sweep's launches (bench/sweep/launch_off.h,
 * bench/canary/proc_launch.h, bench/sweep/machine.h): the speculation-off command derived
 * from the four engines' template styles (specbed serve refuses --depth 0,
 * so substituting 0 is no launch at all); templates it cannot turn off are
 * refused rather than run speculating; a template without {port} is refused
 * at once; --port-base picks the first free port from the base; the SIMD
 * path read from /proc/cpuinfo flags and serve's "kernels" startup line. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "launch_off.h"
#include "machine.h"
#include "proc_launch.h"
#include "test_util.h"

static void off_is(const char *tmpl, const char *want, const char *want_removed) {
    char out[4096], rm[1024], err[1024];
    int rc = launch_off_derive(tmpl, out, sizeof out, rm, sizeof rm, err, sizeof err);
    CHECKF(rc == 0, "%s: %s\n", tmpl, err);
    if (rc) return;
    CHECKF(!strcmp(out, want), "%s\n  got  '%s'\n  want '%s'\n", tmpl, out, want);
    if (want_removed) CHECKF(!strcmp(rm, want_removed), "removed '%s', want '%s'\n", rm, want_removed);
}

static void off_refused(const char *tmpl, const char *why) {
    char out[4096], rm[1024], err[1024] = "";
    int rc = launch_off_derive(tmpl, out, sizeof out, rm, sizeof rm, err, sizeof err);
    CHECKF(rc != 0, "%s: derived '%s', want a refusal\n", tmpl, out);
    CHECKF(strstr(err, why) && strstr(err, "--launch-off"), "%s: message '%s' lacks '%s' / --launch-off\n", tmpl, err, why);
}

static void test_launch_off(void) {
    /* specbed serve: the quickstart's and the README's shapes */
    off_is("build/specbed serve --model models/tiny --drafter {drafter} {drafter_args} --depth {depth} --port {port}",
           "build/specbed serve --model models/tiny --port {port}", "--drafter {drafter} {drafter_args} --depth {depth}");
    off_is("build/specbed serve --model models/tiny --drafter mtp --depth {depth} --verify-schedule threshold "
           "--p-min 0.3 --port {port}", "build/specbed serve --model models/tiny --port {port}", NULL);
    off_is("OMP_NUM_THREADS=1 build/specbed serve --model m --drafter=draft --draft-model models/tiny-draft "
           "--depth={depth} --port {port}", "OMP_NUM_THREADS=1 build/specbed serve --model m --port {port}", NULL);
    /* a DSpark option serve would refuse without its drafter goes too */
    off_is("build/specbed serve --model m --drafter dspark --draft-model models/tiny-dspark --dspark-final-tap normed "
           "--depth {depth} --port {port}", "build/specbed serve --model m --port {port}", NULL);
    off_is("mpirun -np 2 build/specbed serve --model m --tp 2 --drafter mtp --depth {depth} --port {port}",
           "mpirun -np 2 build/specbed serve --model m --tp 2 --port {port}", NULL);
    /* vLLM: the JSON value goes whole, spaces and all */
    off_is("vllm serve Qwen/Qwen3-8B --port {port} --speculative-config "
           "'{\"method\": \"ngram\", \"num_speculative_tokens\": {depth}, \"prompt_lookup_max\": 4}' --max-num-seqs 64",
           "vllm serve Qwen/Qwen3-8B --port {port} --max-num-seqs 64", NULL);
    off_is("vllm serve m --speculative_config \"{\\\"method\\\": \\\"mtp\\\", \\\"num_speculative_tokens\\\": {depth}}\" "
           "--port {port}", "vllm serve m --port {port}", NULL);
    /* SGLang */
    off_is("python -m sglang.launch_server --model-path m --port {port} --speculative-algorithm EAGLE "
           "--speculative-draft-model-path d --speculative-num-steps {depth} --speculative-eagle-topk 1 "
           "--speculative-num-draft-tokens 4 --mem-fraction-static 0.8",
           "python -m sglang.launch_server --model-path m --port {port} --mem-fraction-static 0.8", NULL);
    /* llama-server: short and long forms, a two-valued flag */
    off_is("llama-server -m t.gguf -md d.gguf --draft-max {depth} --draft-min 0 --draft-p-min 0.5 -ngld 99 "
           "--port {port} -c 4096", "llama-server -m t.gguf --port {port} -c 4096",
           "-md d.gguf --draft-max {depth} --draft-min 0 --draft-p-min 0.5 -ngld 99");
    off_is("llama-server --model t.gguf --model-draft d.gguf --draft {depth} --spec-replace a b --port {port}",
           "llama-server --model t.gguf --port {port}", NULL);
    /* bench/RECORD.md's llama-server sweep (llama.cpp 0.3.36 flags; -td/-tbd are the draft model's threads) */
    off_is("S -m t.gguf -md d.gguf --spec-type draft-simple --spec-draft-n-max {depth} --spec-draft-n-min 0 "
           "--host 127.0.0.1 --port {port} --metrics -c 4096 -np 4 --temp 0 -t 1 -tb 1 -td 1 -tbd 1",
           "S -m t.gguf --host 127.0.0.1 --port {port} --metrics -c 4096 -np 4 --temp 0 -t 1 -tb 1", NULL);
    /* cannot be turned off from here: refused, never a launch that still speculates */
    off_refused("myserver --spec-k {depth} --port {port}", "{depth}");
    off_refused("./run.sh {drafter} {depth} {port}", "{depth}");
    off_refused("vllm serve m --port {port}", "none of the speculation flags");
    off_refused("sh -c \"specbed serve --drafter mtp --depth {depth} --port {port}\"", "{depth}");
    off_refused("specbed serve --drafter mtp --depth {depth} --port {port} --name 'x", "unterminated");
}

static void test_port(void) {
    char err[512] = "";
    CHECK(proc_template_check("serve --port {port}", "--launch", err, sizeof err) == 0);
    CHECK(proc_template_check("serve --port 8000", "--launch", err, sizeof err) != 0);
    CHECKF(strstr(err, "--launch") && strstr(err, "{port}"), "message: %s\n", err);
    /* occupy a port, then ask for it as the base: the next one up comes back */
    int fd = socket(AF_INET, SOCK_STREAM, 0), base = 0;
    CHECK(proc_free_port(&base, err, sizeof err) == 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((unsigned short)base);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 1) || base > 65000) {
        fprintf(stderr, "test_port: cannot hold a port; the base check is skipped\n");
    } else {
        int p = 0;
        CHECK(proc_pick_port(base, &p, err, sizeof err) == 0);
        CHECKF(p > base && p < base + 100, "picked %d from base %d (held)\n", p, base);
    }
    if (fd >= 0) close(fd);
    int p = 0;
    CHECK(proc_pick_port(0, &p, err, sizeof err) == 0 && p > 0);
}

static void test_machine(void) {
    CHECK(!strcmp(machine_simd_from_flags("fpu sse2 avx avx2 fma avx512f avx512bw"), "avx512"));
    CHECK(!strcmp(machine_simd_from_flags("fpu sse2 avx avx2 fma bmi2"), "avx2"));
    CHECK(!strcmp(machine_simd_from_flags("fpu sse2 avx avx2"), "scalar"));   /* avx2 without fma: not the avx2 path */
    CHECK(!strcmp(machine_simd_from_flags("fpu avx512fx"), "scalar"));        /* whole words only */
    char k[64];
    CHECK(machine_server_kernels("x\nspecbed serve: listening on http://127.0.0.1:5 (model m as 'm', drafter none, "
                                 "depth 0, verify schedule fixed, max-running 16, max-queue 256, context 2048, batch "
                                 "rows 336, kernels avx2 x4, tp 1)\n", k, sizeof k) == 0 && !strcmp(k, "avx2 x4"));
    CHECK(machine_server_kernels("INFO: Uvicorn running on http://0.0.0.0:8000", k, sizeof k) == -1);
    /* nvidia-smi's lines as an H200 machine printed them (2026-12-04), one GPU and two */
    char g[512];
    machine_gpu_from_smi("NVIDIA H200, 580.159.04\n", g, sizeof g);
    CHECKF(!strcmp(g, "NVIDIA H200 (driver 580.159.04)"), "gpu '%s'\n", g);
    machine_gpu_from_smi("NVIDIA H200, 580.159.04\nNVIDIA H200, 580.159.04\n", g, sizeof g);
    CHECKF(!strcmp(g, "NVIDIA H200 (driver 580.159.04); NVIDIA H200 (driver 580.159.04)"), "gpu '%s'\n", g);
    machine_gpu_from_smi("", g, sizeof g);
    CHECK(!strcmp(g, "none"));
    machine_info m;
    machine_probe(&m);
    CHECK(m.cpus >= 1);
    CHECK(m.cpu_model[0] && m.simd[0] && m.gpu[0]);
}

int main(void) {
    test_launch_off();
    test_port();
    test_machine();
    return tu_done("test_bench_launch");
}
