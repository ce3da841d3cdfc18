/*
 * GPT-2 trainer: command line, start-up, and the training loop. The model lives in llmc/gpt2.cuh;
 * data, schedules, state files and logging in their own llmc/ headers. Flags and the step line
 * follow llm.c (see README and docs/formats.md).
 */
#include <signal.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "llmc/auto_settings.h"
#include "llmc/checkpoint.cuh"
#include "llmc/dataloader.h"
#include "llmc/eval_loader.h"
#include "llmc/gpt2.cuh"
#include "llmc/logger.h"
#include "llmc/mfu.h"
#include "llmc/outlier_detector.h"
#include "llmc/rank_agreement.h"
#include "llmc/run_state.h"
#include "llmc/schedulers.h"
#include "llmc/step_line.h"
#include "llmc/tokenizer.h"
#include "llmc/train_plan.h"
#include "llmc/train_step.cuh"
#include "llmc/watchdog.h"
#include "llmc/multi_gpu.cuh"

// ----------------------------------------------------------------------------
// command line

struct TrainConfig {
    std::string train_pattern = "dev/data/tinyshakespeare/tiny_shakespeare_train.bin";  // -i
    std::string val_pattern = "dev/data/tinyshakespeare/tiny_shakespeare_val.bin";      // -j
    std::string init = DEFAULT_INIT_FILE;  // -e: checkpoint file, dN / gpt2:dN / gpt3:cN / custom:...
    bool init_given = false;          // -e was on the command line
    std::string output_dir;           // -o
    std::string eval_file = "dev/data/hellaswag/hellaswag_val.bin";
    std::string tokenizer_file = "gpt2_tokenizer.bin";
    int B = 4;                        // -b
    int T = 1024;                     // -t
    long total_batch = -1;            // -d (tokens); -1 = B*T*processes
    int max_steps = -1;               // -x: -1 = one epoch, 0 = no update (train_plan.h)
    std::string schedule = "cosine";  // -k
    float lr = 3e-4f;                 // -l
    int warmup = 0;                   // -u
    float final_lr_frac = 1.0f;       // -q
    float weight_decay = 0.0f;        // -c
    int val_every = 20;               // -v
    int val_max_steps = 20;           // -m: -1 = whole val split
    int sample_every = 20;            // -s
    int gen_tokens = 64;              // -g
    int hellaswag = 0;                // -h
    int checkpoint_every = 0;         // -n
    int keep_last = 0;                // -nk
    int keep_multiple = 0;            // -nm
    int resume = 0;                   // -y
    int recompute = -1;               // -r: -1 = picked at start-up (llmc/auto_settings.h)
    int gelu_fusion = -1;             // -ge: -1 = picked at start-up (llmc/auto_settings.h)
    int master_weights = 1;           // -w
    int zero_stage = 0;               // -z
    int overfit_single_batch = 0;     // -a
    int allow_tf32 = 1;               // -f
    int matmul_autotune = 1;          // -ma (ours): fastest bitwise-equal cuBLASLt algorithm per GEMM shape
    float skip_loss_z = 0.0f;         // -sl
    float skip_norm_z = 0.0f;         // -sg
    int gpu_log_every = -1;           // -lg: <= 0 off (llm.c's default -1)
    int shuffle = 1;                  // -sh (ours): 1 = llm.c's train data shuffle, 0 = file order
    bool shuffle_given = false;       //   -sh was on the command line (-a 1 turns the default off)
    int phase_timing = 0;             // -pt (ours): print GPU time per phase of the step at the end
    int overlap_update = 0;           // -ao (ours): AdamW on a second stream, under the next step's forward
    uint64_t seed = 42;               // -seed (ours): -e dN init (42 gives llm.c's) and sampling (shuffle: 42 + rank)
    // multi-process
    int num_processes = 1;            // -pn
    int process_rank = 0;             // -pr
    int gpus_per_node = 8;            // -pg
    std::string init_method = "mpi";  // -pi
    std::string server_ip;            // -ps
    std::string fs_path;              // -pf
    int port = NCCL_ID_DEFAULT_PORT;  // -pp (ours): llmc/nccl_id_exchange.h
    float watchdog_s = 1200.0f;       // -wt (ours): longest wait on a collective before aborting (0 = none)
};

static void print_usage() {
    printf(
        "usage: train_gpt2cu [flags], each flag followed by a value\n"
        "  -i <glob>  train token shards          -j <glob>  val token shards\n"
        "  -e <init>  checkpoint .bin (default gpt2_124M_bf16.bin, as llm.c), or random init of a shape:\n"
        "             GPT-2 dN / gpt2:dN: d12 = 124M (12 layers, C 768, 12 heads), d24 = 350M (24, 1024, 16),\n"
        "             d36 = 774M (36, 1280, 20), d48 = 1558M (48, 1600, 25); also d6, d60, d72, d84;\n"
        "             GPT-3 gpt3:cC (maxT 2048): c384, c768, c1024, c1536, c2048, c2560, c4096, c12288;\n"
        "             custom:L<layers>,C<channels>,NH<heads>\n"
        "  -o <dir>   output dir: main.log and checkpoints\n"
        "  -b <int>   micro-batch per GPU (4)     -t <int>   sequence length (1024)\n"
        "  -d <int>   total batch in tokens (B*T*processes); gradient accumulation = d / (B*T*processes)\n"
        "  -x <int>   steps (-1 = one epoch: train tokens / -d, rounded down; 0 = none)\n"
        "  -k <name>  LR schedule cosine|linear|constant|wsd   -l <float> max LR (3e-4)\n"
        "  -u <int>   warmup steps (0)            -q <float> final LR fraction (1.0)\n"
        "  -c <float> weight decay, 2-D tensors (0.0)\n"
        "  -v <int>   val loss every N steps (20) -m <int>   val batches (20; -1 = whole val split)\n"
        "  -s <int>   sample every N steps (20)   -g <int>   tokens to generate (64)\n"
        "  -h <0|1>   multiple-choice eval every -v steps from step -v on, and at the end (0)\n"
        "  -n <int>   with -o, checkpoint every N steps and at the end (0 = never; a signal still saves)\n"
        "  -nk <int>  after writing step S, delete step S - nk*n (0 = keep all) unless it is a multiple of\n"
        "  -nm <int>  (0 = none): those major checkpoints are never deleted\n"
        "  -y <0|1>   resume from the newest complete checkpoint in -o\n"
        "  -r <0|1|2> recompute: none, GELU, GELU + LayerNorm (-1 = default: the least whose activations fit)\n"
        "  -ge <0|1|2> GELU fused into matmul: off, forward, forward+backward (-1 = default: 2 in BF16\n"
        "             builds on sm_90 and newer, else 0)\n"
        "  -w <0|1>   fp32 master weights (1)     -z <0|1>   ZeRO stage (0)\n"
        "  -a <0|1>   overfit a single batch (0)  -f <0|1>   allow TF32 in FP32 builds (1)\n"
        "  -sl <float> / -sg <float>  skip update when loss / grad-norm z-score exceeds this (0 = off; a\n"
        "             negative one is on too, as in llm.c)\n"
        "  -lg <int>  print GPU utilisation every N steps (-1 = off)\n"
        "  -sh <0|1>  train data order: 1 = shuffled as llm.c does (default; its seed is 42 + rank),\n"
        "             0 = file order; -a 1 turns it off     -seed <int> seed of -e dN init and sampling (42)\n"
        "  -pt <0|1>  time each phase of the step on the GPU and print a table at the end (0)\n"
        "  -ao <0|1>  run each AdamW update on a second stream, overlapped with the next forward; the same\n"
        "             results bit for bit (0; single process or ZeRO-0, and not with -pt 1)\n"
        "  -ma <0|1>  per GEMM shape, the fastest cuBLASLt algorithm among those giving the same bits as\n"
        "             cuBLASLt's first choice, timed on the first call; likewise cuDNN's attention plans (1)\n"
        "  -pn / -pr / -pg / -pi / -ps / -pf / -pp   processes / rank / GPUs per node / init (mpi|tcp|fs)\n"
        "             / server IP / shared dir / TCP port\n"
        "  -wt <float> seconds a wait on the GPU or a collective may last before the run aborts its NCCL\n"
        "             communicator and exits 1, naming the step and the wait (1200; 0 = no limit; at most 1e9)\n"
        "integers are written [+-]digits and numbers as decimals (3e-4, 0.1): no blanks, hex, nan or inf\n");
}

// Flag values are exactly what they look like: an integer is [+-]digits, a number is a decimal like
// 3e-4, 0.1, -2 or .5 (no blanks, hex, nan or inf), and every value must lie in its flag's range, which
// the message gives. `what` describes the range where "in [lo, hi]" would not say it well.
static long long parse_int(const char* flag, const char* value, long long lo, long long hi, const char* what = nullptr) {
    const char* p = value + (value[0] == '-' || value[0] == '+');
    if (*p == '\0' || strspn(p, "0123456789") != strlen(p)) {
        fatal("flag %s expects an integer, got '%s'", flag, value);
    }
    errno = 0;
    const long long v = strtoll(value, nullptr, 10);
    if (errno == ERANGE || v < lo || v > hi) {
        if (what != nullptr) fatal("flag %s must be %s, got %s", flag, what, value);
        fatal("flag %s must be in [%lld, %lld], got %s", flag, lo, hi, value);
    }
    return v;
}

// True when s is a decimal number: [+-] digits [. digits] or [+-] . digits, then an optional exponent.
static bool is_decimal_number(const char* s) {
    const char* p = s + (*s == '-' || *s == '+');
    const size_t whole = strspn(p, "0123456789");
    p += whole;
    size_t frac = 0;
    if (*p == '.') frac = strspn(++p, "0123456789");
    p += frac;
    if (whole + frac == 0) return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        p += (*p == '-' || *p == '+');
        const size_t exp_digits = strspn(p, "0123456789");
        if (exp_digits == 0) return false;
        p += exp_digits;
    }
    return *p == '\0';
}

static float parse_float(const char* flag, const char* value, double lo, double hi, const char* what) {
    if (!is_decimal_number(value)) {
        const char* word = value + (value[0] == '-' || value[0] == '+');
        if (strcasecmp(word, "nan") == 0 || strcasecmp(word, "inf") == 0 || strcasecmp(word, "infinity") == 0) {
            fatal("flag %s expects a finite number, got '%s'", flag, value);
        }
        fatal("flag %s expects a decimal number (like 3e-4 or 0.1), got '%s'", flag, value);
    }
    errno = 0;
    const double d = strtod(value, nullptr);  // ERANGE: beyond double; the float limits below are narrower
    if (std::fabs(d) > FLT_MAX || (errno == ERANGE && std::fabs(d) >= 1.0)) {
        fatal("flag %s: %s is beyond the largest float (%g)", flag, value, (double)FLT_MAX);
    }
    // below FLT_MIN: a denormal, which the GPU flushes to 0 (--use_fast_math), or nothing at all
    if ((errno == ERANGE || d != 0.0) && std::fabs(d) < FLT_MIN) {
        fatal("flag %s: %s is below the smallest normal float (%g): write 0 for zero, or a value of at least %g",
              flag, value, (double)FLT_MIN, (double)FLT_MIN);
    }
    if (d < lo || d > hi) fatal("flag %s must be %s, got %s", flag, what, value);
    return (float)d;
}

static TrainConfig parse_args(int argc, char** argv) {
    TrainConfig c;
    constexpr long long I32 = INT32_MAX;
    for (int i = 1; i < argc; i += 2) {
        const std::string f = argv[i];
        if (f == "--help" || f == "-help") {
            print_usage();
            exit(0);
        }
        if (f.size() < 2 || f[0] != '-') fatal("expected a flag like -b, got '%s' (run with --help)", argv[i]);
        if (i + 1 >= argc) fatal("flag %s needs a value (run with --help)", argv[i]);
        const char* v = argv[i + 1];
        const char* fl = argv[i];
        auto flag01 = [&] { return (int)parse_int(fl, v, 0, 1); };
        if (f == "-i") c.train_pattern = v;
        else if (f == "-j") c.val_pattern = v;
        else if (f == "-e") { c.init = v; c.init_given = true; }
        else if (f == "-o") c.output_dir = v;
        else if (f == "-b") c.B = (int)parse_int(fl, v, 1, 1 << 20);
        else if (f == "-t") c.T = (int)parse_int(fl, v, 1, 1 << 20);
        else if (f == "-d") {
            const char* what = "a positive number of tokens up to 2147483647 (or -1 for B*T*processes)";
            c.total_batch = parse_int(fl, v, -1, I32, what);
            if (c.total_batch == 0) fatal("flag -d must be %s, got 0", what);
        }
        else if (f == "-x") c.max_steps = (int)parse_int(fl, v, -1, I32, "in [-1, 2147483647] (-1: one epoch, 0: no update)");
        else if (f == "-k") c.schedule = v;
        else if (f == "-l") c.lr = parse_float(fl, v, 0.0, FLT_MAX, ">= 0");
        else if (f == "-u") c.warmup = (int)parse_int(fl, v, 0, I32);
        else if (f == "-q") c.final_lr_frac = parse_float(fl, v, 0.0, 1.0, "in [0, 1]");
        else if (f == "-c") c.weight_decay = parse_float(fl, v, 0.0, FLT_MAX, ">= 0 (weight decay)");
        else if (f == "-v") c.val_every = (int)parse_int(fl, v, 0, I32, "in [0, 2147483647] (0: no val loss)");
        else if (f == "-m") c.val_max_steps = (int)parse_int(fl, v, -1, I32, "in [-1, 2147483647] (-1: whole val split)");
        else if (f == "-s") c.sample_every = (int)parse_int(fl, v, 0, I32, "in [0, 2147483647] (0: no samples)");
        else if (f == "-g") c.gen_tokens = (int)parse_int(fl, v, 0, I32);
        else if (f == "-h") c.hellaswag = flag01();
        else if (f == "-n") c.checkpoint_every = (int)parse_int(fl, v, 0, I32, "in [0, 2147483647] (0: never)");
        else if (f == "-nk") c.keep_last = (int)parse_int(fl, v, 0, I32, "in [0, 2147483647] (0: keep all)");
        else if (f == "-nm") c.keep_multiple = (int)parse_int(fl, v, 0, I32, "in [0, 2147483647] (0: none)");
        else if (f == "-y") c.resume = flag01();
        else if (f == "-r") c.recompute = (int)parse_int(fl, v, -1, 2, "in [-1, 2] (-1: the least that fits)");
        else if (f == "-ge") c.gelu_fusion = (int)parse_int(fl, v, -1, 2, "in [-1, 2] (-1: picked for the GPU)");
        else if (f == "-w") c.master_weights = flag01();
        else if (f == "-z") c.zero_stage = (int)parse_int(fl, v, 0, 1, "0 or 1 (the ZeRO stages implemented)");
        else if (f == "-a") c.overfit_single_batch = flag01();
        else if (f == "-f") c.allow_tf32 = flag01();
        else if (f == "-ma") c.matmul_autotune = flag01();
        // -sl / -sg: any finite z-score; 0 = off, and a negative one is on, as in llm.c (outlier_skip)
        else if (f == "-sl") c.skip_loss_z = parse_float(fl, v, -FLT_MAX, FLT_MAX, "a z-score (0 = off)");
        else if (f == "-sg") c.skip_norm_z = parse_float(fl, v, -FLT_MAX, FLT_MAX, "a z-score (0 = off)");
        else if (f == "-lg") c.gpu_log_every = (int)parse_int(fl, v, -1, I32, "in [-1, 2147483647] (-1 or 0: off)");
        else if (f == "-sh") { c.shuffle = flag01(); c.shuffle_given = true; }
        else if (f == "-pt") c.phase_timing = flag01();
        else if (f == "-ao") c.overlap_update = flag01();
        else if (f == "-seed") c.seed = (uint64_t)parse_int(fl, v, 0, INT64_MAX);
        else if (f == "-pn") c.num_processes = (int)parse_int(fl, v, 1, 1 << 16);  // state files name ranks with 5 digits
        else if (f == "-pr") c.process_rank = (int)parse_int(fl, v, 0, (1 << 16) - 1);
        else if (f == "-pg") c.gpus_per_node = (int)parse_int(fl, v, 1, 1 << 16);
        else if (f == "-pi") c.init_method = v;
        else if (f == "-ps") c.server_ip = v;
        else if (f == "-pf") c.fs_path = v;
        else if (f == "-pp") c.port = (int)parse_int(fl, v, 1, 65535);
        else if (f == "-wt") {
            // the watchdog's deadline is a 64-bit count of nanoseconds (llmc/watchdog.h)
            const std::string what = "in [0, " + std::to_string((long long)WATCHDOG_MAX_TIMEOUT_S) +
                                     "] seconds (0 = no limit)";
            c.watchdog_s = parse_float(fl, v, 0.0, WATCHDOG_MAX_TIMEOUT_S, what.c_str());
        }
        else fatal("unknown flag %s (run with --help)", argv[i]);
    }
    if (c.overfit_single_batch && c.shuffle) {  // llm.c: -a 1 loads the train data unshuffled
        if (c.shuffle_given) fatal("-a 1 reads the first windows of -j in order at every step: it cannot shuffle (-sh 1)");
        c.shuffle = 0;
    }
    if (c.overfit_single_batch && c.val_pattern.empty()) fatal("-a 1 trains on the start of the -j data (as llm.c), but -j is empty");
    if (c.resume && c.output_dir.empty()) fatal("-y 1 needs -o <dir> to find checkpoints in");
    if (c.checkpoint_every > 0 && c.output_dir.empty()) fatal("-n %d needs -o <dir> to write checkpoints to", c.checkpoint_every);
    // -pi, -pn, -pr, -pg, -z: the start-up's own checks (llmc/multi_gpu.cuh), here before any CUDA call;
    // then what -pi tcp / fs need: -ps a valid address, -pf a directory
    multi_gpu_check_args(c.num_processes, c.process_rank, c.gpus_per_node, c.init_method.c_str(), c.zero_stage);
    const std::string exchange = id_exchange_args_problem(c.init_method.c_str(), c.server_ip.c_str(), c.fs_path.c_str());
    if (!exchange.empty()) fatal("%s", exchange.c_str());
    return c;
}

// ----------------------------------------------------------------------------
// signals: SIGINT / SIGTERM finish the current step, checkpoint (with -o) and exit

static volatile sig_atomic_t g_stop_signal = 0;
static void on_stop_signal(int sig) { g_stop_signal = sig; }

// ----------------------------------------------------------------------------
// pieces of the loop

struct Trainer {
    TrainConfig cfg;
    MultiGpuConfig mp;
    GpuContext ctx;  // llmc/gpu_context.cuh: made in setup once the device is chosen, held by the model
    GPT2 model;
    DataLoader train_loader, val_loader;
    EvalLoader eval_loader;
    bool have_val = false, have_eval = false;
    Tokenizer tokenizer;
    bool have_tokenizer = false;
    Logger logger;
    LRScheduler scheduler;
    OutlierDetector loss_outlier, norm_outlier;
    int grad_accum = 1;
    int train_num_batches = 0;
    int val_num_batches = 0;
    int start_step = 0;
    bool resumed = false;  // start_step comes from a checkpoint
    uint64_t sample_rng = 1337;
    GpuPeak peak;
    CheckpointRead resume;  // -y 1: read and checked on the host before the GPU starts, uploaded after
    ResumeHostState resume_fresh;  // -y 1: loader and outlier windows as the set-up left them
    bool resume_fresh_saved = false;
    Watchdog watchdog;  // bounds every wait of the loop on the GPU / a collective (-wt)
    std::string recompute_why, gelu_fusion_why;  // -r / -ge picked at start-up: why (the table)
};

static bool is_rank0(const Trainer& tr) { return tr.mp.process_rank == 0; }

static float evaluate_val_loss(Trainer& tr) {
    GPT2& m = tr.model;
    const int B = tr.cfg.B, T = tr.cfg.T;
    dataloader_reset(&tr.val_loader);
    const int steps = tr.val_num_batches;  // may exceed the split: the loader wraps, as llm.c's
    double sum = 0.0;
    for (int i = 0; i < steps; i++) {
        dataloader_next_batch(&tr.val_loader);
        gpt2_zero_losses(&m);
        gpt2_forward(&m, tr.val_loader.inputs, tr.val_loader.targets, B, T, false);
        sum += gpt2_losses_sum(&m, B, T) / (B * T);
    }
    float local = steps > 0 ? (float)(sum / steps) : 0.0f;
    return multi_gpu_cpu_float_sum(local, &tr.mp) / tr.mp.num_processes;
}

static float evaluate_multiple_choice(Trainer& tr) {
    GPT2& m = tr.model;
    const int B = tr.cfg.B, T = tr.cfg.T;
    eval_loader_reset(&tr.eval_loader);
    int correct = 0;
    const size_t batches = eval_loader_num_batches(&tr.eval_loader);
    for (size_t i = 0; i < batches; i++) {
        eval_loader_next_batch(&tr.eval_loader);
        gpt2_zero_losses(&m);
        gpt2_forward(&m, tr.eval_loader.inputs, tr.eval_loader.targets, B, T, false);
        gpt2_losses_sum(&m, B, T);  // copies the per-token losses to m.losses_host
        correct += eval_loader_stat_losses(&tr.eval_loader, m.losses_host);
    }
    const float total_correct = multi_gpu_cpu_float_sum((float)correct, &tr.mp);
    return total_correct / (float)tr.eval_loader.examples.size();
}

// The token samples start after: the tokenizer's end-of-text (llmc/tokenizer.h), GPT-2's without one.
static int sample_start_token(const Trainer& tr) {
    return tokenizer_sample_start(tr.have_tokenizer ? &tr.tokenizer : nullptr);
}

// Samples gen_tokens tokens after an end-of-text, one full forward of the single row per token.
static void generate_sample(Trainer& tr) {
    GPT2& m = tr.model;
    const GPT2Config& c = m.config;
    const int T = tr.cfg.T;
    std::vector<int> tokens(T, sample_start_token(tr));
    std::vector<floatX> logits(c.padded_vocab_size);
    std::vector<float> probs(c.vocab_size);
    const int n = std::min(tr.cfg.gen_tokens, T - 1);
    printf("generating:\n---\n");
    for (int t = 1; t <= n; t++) {
        gpt2_forward(&m, tokens.data(), nullptr, 1, T, false);
        cudaCheck(cudaMemcpyAsync(logits.data(), m.acts.output + (size_t)(t - 1) * c.padded_vocab_size,
                                  c.padded_vocab_size * sizeof(floatX), cudaMemcpyDeviceToHost, m.stream));
        cudaCheck(cudaStreamSynchronize(m.stream));
        float maxv = -INFINITY;
        for (int v = 0; v < c.vocab_size; v++) maxv = std::max(maxv, (float)logits[v]);
        double sum = 0.0;
        for (int v = 0; v < c.vocab_size; v++) sum += (probs[v] = expf((float)logits[v] - maxv));
        const double coin = random_f32(&tr.sample_rng) * sum;
        double cdf = 0.0;
        int next = c.vocab_size - 1;
        for (int v = 0; v < c.vocab_size; v++) {
            cdf += probs[v];
            if (coin < cdf) { next = v; break; }
        }
        tokens[t] = next;
        if (tr.have_tokenizer) tokenizer_print(stdout, &tr.tokenizer, next);
        else printf("%d ", next);
        fflush(stdout);
    }
    printf("\n---\n");
}

// Checkpoint `step` (llmc/checkpoint.cuh) with the trainer's part of the state file, then llm.c's
// -nk/-nm deletion of an older one.
static void save_checkpoint(Trainer& tr, int step) {
    const std::string& dir = tr.cfg.output_dir;
    RunState rs;
    rs.shuffle = tr.cfg.shuffle != 0;
    rs.loader = dataloader_get_state(&tr.train_loader);
    rs.has_outliers = true;
    rs.loss_outlier = tr.loss_outlier;
    rs.grad_norm_outlier = tr.norm_outlier;
    checkpoint_save(&tr.model, dir, step, rs);
    if (is_rank0(tr)) printf("checkpoint: wrote step %d to %s\n", step, dir.c_str());
    // llm.c's -nk/-nm rule (train_plan.h): one older checkpoint goes, DONE first
    const int old_step = checkpoint_to_delete(step, tr.cfg.checkpoint_every, tr.cfg.keep_last, tr.cfg.keep_multiple);
    if (old_step > 0) {
        if (is_rank0(tr)) {
            printf("checkpoint: deleting step %d\n", old_step);
            checkpoint_delete_done(dir, old_step);
        }
        multi_gpu_barrier(&tr.mp);
        checkpoint_delete_files(dir, old_step, tr.mp.process_rank);
    }
}

// -y 1, host part (before any CUDA call): removes the leftovers of an interrupted checkpoint, then reads
// and checks all of checkpoint `step` (model header vs the configuration, the whole run state with its
// checksum, the data position) into tr.resume and restores the loader and outlier windows from it.
// step < 0: the newest complete checkpoint in this process's view of -o (resume_choose_step), or nothing
// when there is none. shard_size: optimizer elements of this process. The first call keeps the fresh
// loader and windows, which resume_upload goes back to if the ranks agree on another step.
static void resume_read(Trainer& tr, const GPT2Config& mc, size_t shard_size, int step = -1) {
    const std::string& dir = tr.cfg.output_dir;
    const int rank = tr.cfg.process_rank;
    if (!tr.resume_fresh_saved) {
        tr.resume_fresh = resume_host_state(&tr.train_loader, tr.loss_outlier, tr.norm_outlier);
        tr.resume_fresh_saved = true;
    }
    if (step < 0) {
        for (const std::string& f : ckpt_remove_leftovers(dir, rank)) {
            printf("resume: removed '%s', left by an interrupted checkpoint\n", f.c_str());
        }
    }
    CheckpointRead& r = tr.resume;
    r = CheckpointRead();
    const int chosen = step < 0 ? resume_choose_step(dir) : step;
    if (chosen >= 0) {
        if (step < 0) {  // this process's own choice (an agreed step's files are checked on every rank together)
            const std::string incomplete = ckpt_incomplete_problem(dir, chosen, rank);
            if (!incomplete.empty()) fatal("%s", incomplete.c_str());
        }
        const ZeroLayout layout = tr.cfg.zero_stage == 1 ? zero_shard_layout(mc, tr.cfg.num_processes) : ZeroLayout::llmc;
        checkpoint_read(&r, dir, chosen, mc, "-e " + tr.cfg.init, tr.cfg.num_processes, rank, shard_size, kFloatXIsBF16,
                        tr.cfg.master_weights != 0, layout);
        if (r.model_path != tr.cfg.init) model_file_check_finite(r.model_path.c_str(), r.info);  // else checked as -e
    }
    resume_restore_host(r, tr.resume_fresh, &tr.train_loader, &tr.loss_outlier, &tr.norm_outlier);
}

// -y 1, after the processes are up (llmc/rank_agreement.h): every rank has rank 0's model shape and takes
// rank 0's step; a rank whose own view of -o chose another step reads rank 0's instead, or drops its
// read when rank 0 starts fresh, and its loader and outlier windows are set anew for that step; when any
// rank lacks a file of that step, every rank stops, each naming what it lacks. Then the upload and rank
// 0's rounding RNG on every rank (llm.c's files hold one per rank); a fresh start takes rank 0's initial
// weights on every rank (without -e a rank may have loaded its own stale checkpoint's). Returns the step
// to continue from.
static int resume_upload(Trainer& tr, const GPT2Config& mc) {
    const RankComm comm = rank_comm_of(&tr.mp);
    const std::string& dir = tr.cfg.output_dir;
    {
        WatchdogWait w(&tr.watchdog, 0, "resume: the model, step and file checks (ncclBroadcast / ncclAllReduce)");
        ranks_agree_model(mc, "-e " + tr.cfg.init, comm);
        const int step = resume_agree(&tr.resume, dir, tr.resume_fresh, &tr.train_loader, &tr.loss_outlier,
                                      &tr.norm_outlier, comm,
                                      [&](int s) { resume_read(tr, mc, tr.model.shard.size, s); });
        if (step < 0 && is_rank0(tr)) printf("resume: no complete checkpoint in %s, starting fresh\n", dir.c_str());
    }
    const CheckpointRead& r = tr.resume;
    if (r.step < 0) {
        WatchdogWait w(&tr.watchdog, 0, "resume: rank 0's initial weights (ncclBroadcast)");
        multi_gpu_broadcast_params(tr.model.params_memory, tr.model.num_parameters, &tr.mp, tr.model.stream);
        cudaCheck(cudaStreamSynchronize(tr.model.stream));
        return 0;
    }
    checkpoint_upload(&tr.model, r);
    {
        WatchdogWait w(&tr.watchdog, 0, "resume: rank 0's rounding RNG (ncclBroadcast)");
        resume_agree_rng(&tr.model.rng_state, &tr.model.rng_state_last_update, comm);
    }
    if (is_rank0(tr)) printf("resume: loaded step %d from %s\n", r.step, dir.c_str());
    const int step = r.step;
    tr.resume = CheckpointRead();  // the host copies are no longer needed
    return step;
}

// Val loss, multiple-choice eval and a text sample at the steps that ask for them.
static void evaluate_and_sample(Trainer& tr, int step, bool last_step) {
    if (tr.have_val && (step % tr.cfg.val_every == 0 || last_step)) {
        const float val_loss = evaluate_val_loss(tr);
        if (is_rank0(tr)) printf("val loss %f\n", val_loss);
        logger_log_val(&tr.logger, step, val_loss);
    }
    if (tr.have_eval && eval_due(step, last_step, tr.cfg.val_every)) {
        const float acc = evaluate_multiple_choice(tr);
        if (is_rank0(tr)) printf("HellaSwag: %.4f\n", acc);
        logger_log_eval(&tr.logger, step, acc);
    }
    if (is_rank0(tr) && tr.cfg.sample_every > 0 && tr.cfg.gen_tokens > 0 && ((step > 0 && step % tr.cfg.sample_every == 0) || last_step)) {
        generate_sample(tr);
    }
}

// ----------------------------------------------------------------------------
// start-up

// Stops with a message naming the flag when a shard pattern matches nothing (checked before any GPU
// or process start-up, so a typo fails fast everywhere; the data loader's own check).
static void require_matches(const std::string& pattern, const char* flag) { dataloader_glob(pattern.c_str(), flag); }

// Rank and process count before any start-up: mpirun announces them in the environment (the values
// MPI_Comm_rank / MPI_Comm_size give later); -pi tcp / fs take -pr / -pn. Everything that depends on
// them (batch geometry, data windows, the optimizer shard) is then checked without touching the GPU.
static void launch_geometry(const TrainConfig& c, int* rank, int* size) {
    *rank = c.process_rank;
    *size = c.num_processes;
    if (c.init_method != "mpi") return;
    *rank = 0;
    *size = 1;
    for (auto [size_var, rank_var] : {std::pair<const char*, const char*>{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
                                      {"PMI_SIZE", "PMI_RANK"}}) {
        const char* sv = getenv(size_var);
        const char* rv = getenv(rank_var);
        if (sv != nullptr && rv != nullptr && atoi(sv) >= 1) {
            *size = atoi(sv);
            *rank = atoi(rv);
            break;
        }
    }
    if (*size == 1 && c.num_processes > 1) *size = c.num_processes;  // start-up will say that -pn disagrees
    if (*rank < 0 || *rank >= *size) fatal("the MPI launcher gives rank %d of %d processes", *rank, *size);
}

// The model's shape, and where its weights come from (setup_model_config -> setup_model).
struct ModelChoice {
    GPT2Config mc{};
    ModelFileInfo info{};         // the model file's header, when the weights come from one
    bool from_descriptor = false;  // -e d12 etc.: random init
};

// Model configuration: descriptor or checkpoint. Resuming without -e takes the shape from the
// checkpoint, as llm.c (which ignores -e when it resumes) does.
static ModelChoice setup_model_config(TrainConfig& c) {
    if (c.resume && !c.init_given) {
        const int latest = ckpt_find_latest(c.output_dir);
        if (latest >= 0) {
            const std::string problem = ckpt_incomplete_problem(c.output_dir, latest, -1);
            if (!problem.empty()) fatal("%s", problem.c_str());
            c.init = ckpt_model_path(c.output_dir, latest);
        }
    }
    ModelChoice m;
    m.from_descriptor = gpt2_config_from_descriptor(c.init.c_str(), &m.mc);
    if (!m.from_descriptor) {
        if (access(c.init.c_str(), F_OK) != 0) fatal("%s", init_file_missing_message(c.init).c_str());
        m.info = model_file_read_header(c.init.c_str());
        m.mc = m.info.cfg;
        model_file_check_finite(c.init.c_str(), m.info);  // one pass over the file (page cache for the load)
    }
    gpt2_check_seq_len(m.mc, c.T);
    const std::string problem = gpt2_config_problem(m.mc);
    if (!problem.empty()) fatal("-e %s: bad model configuration: %s", c.init.c_str(), problem.c_str());
    attention_check_shape(m.mc.channels, m.mc.num_heads);  // the one shape limit of the kernels (head size 64)
    return m;
}

// -a 1 trains on the start of the val data, as llm.c does (val is the small split).
static const std::string& train_pattern(const TrainConfig& c) {
    return c.overfit_single_batch ? c.val_pattern : c.train_pattern;
}
static const char* train_flag(const TrainConfig& c) { return c.overfit_single_batch ? "-j (trained on with -a 1)" : "-i"; }

// Processes: the geometry the start-up (setup_gpu) will find, and what depends on it only: the batch
// sizes. Nothing here starts a process or touches the GPU.
static void setup_processes(Trainer& tr) {
    TrainConfig& c = tr.cfg;
    int rank = 0, nproc = 1;
    launch_geometry(c, &rank, &nproc);
    c.num_processes = nproc;
    c.process_rank = rank;
    tr.mp.process_rank = rank;  // is_rank0() before the start-up
    tr.mp.num_processes = nproc;
    // batch sizes
    const long tokens_per_micro = (long)c.B * c.T * c.num_processes;
    if (c.total_batch < 0) c.total_batch = tokens_per_micro;
    if (c.total_batch % tokens_per_micro != 0) {
        fatal("-d %ld is not divisible by B*T*processes = %d*%d*%d = %ld", c.total_batch, c.B, c.T, c.num_processes,
              tokens_per_micro);
    }
    if (c.total_batch / tokens_per_micro > INT32_MAX) fatal("-d %ld needs too many accumulation steps", c.total_batch);
    tr.grad_accum = (int)(c.total_batch / tokens_per_micro);
    if (c.hellaswag && !eval_file_missing(c.eval_file.c_str())) eval_check_batch(c.B);
}

// Data: every shard's header and size (the token ids are checked shard by shard as the loaders reach
// them: setup_first_shards, then llmc/dataloader.h); the eval file; the step counts, schedule and
// outlier windows that follow from them; the tokenizer.
static void setup_data(Trainer& tr, const GPT2Config& mc) {
    const TrainConfig& c = tr.cfg;
    const long tokens_per_micro = (long)c.B * c.T * c.num_processes;
    dataloader_init(&tr.train_loader, train_pattern(c).c_str(), c.overfit_single_batch ? "-j" : "-i", c.B, c.T,
                    c.process_rank, c.num_processes, c.shuffle != 0);
    dataloader_set_vocab(&tr.train_loader, train_flag(c), mc.vocab_size);
    if (tr.have_val) {
        dataloader_init(&tr.val_loader, c.val_pattern.c_str(), "-j", c.B, c.T, c.process_rank, c.num_processes,
                        false);
        dataloader_set_vocab(&tr.val_loader, "-j", mc.vocab_size);
        tr.val_num_batches = plan_val_batches(c.val_max_steps, shard_pattern_tokens(tr.val_loader.shard_paths),
                                              tokens_per_micro);
    }
    if (c.hellaswag && eval_file_missing(c.eval_file.c_str())) {  // as llm.c: a note, and training goes on
        if (is_rank0(tr)) {
            printf("note: -h 1 but no eval file %s: training without the HellaSwag eval (make it with: "
                   "prepare_dataset eval hellaswag_val.jsonl %s)\n", c.eval_file.c_str(), c.eval_file.c_str());
        }
    } else if (c.hellaswag) {  // a file that is there must be good
        eval_loader_init(&tr.eval_loader, c.eval_file.c_str(), c.B, c.T, c.process_rank, c.num_processes);
        eval_check_vocab(&tr.eval_loader, mc.vocab_size);
        tr.have_eval = true;
    }
    // a step may need more windows than an epoch holds: the loader goes on into the next epoch, as llm.c's
    const size_t train_tokens = shard_pattern_tokens(tr.train_loader.shard_paths);
    tr.train_num_batches = plan_train_steps(c.max_steps, train_tokens, c.total_batch);
    if (c.max_steps == -1 && tr.train_num_batches == 0 && is_rank0(tr)) {
        fprintf(stderr, "warning: -x -1 (one epoch = train tokens / -d, as llm.c) is 0 steps: %s holds %zu tokens, "
                "fewer than -d %ld; give -x to train for more\n", train_flag(c), train_tokens, c.total_batch);
    }
    // -x 0 runs no update: the schedule is never read, but needs a length
    lr_scheduler_init(&tr.scheduler, c.schedule.c_str(), c.lr, c.warmup, std::max(tr.train_num_batches, 1), c.final_lr_frac);
    outlier_detector_init(&tr.loss_outlier);
    outlier_detector_init(&tr.norm_outlier);
    tr.have_tokenizer = tokenizer_init(&tr.tokenizer, c.tokenizer_file.c_str());
    const int start = sample_start_token(tr);
    if (c.sample_every > 0 && c.gen_tokens > 0 && start >= mc.vocab_size) {
        const std::string token = start == GPT2_EOT ? "GPT-2's end-of-text token " + std::to_string(start)
                                                    : "token " + std::to_string(start) + " (the end-of-text of '" +
                                                          c.tokenizer_file + "')";
        fatal("-s %d -g %d: samples start after %s, outside the model's vocabulary of %d ids: use -s 0 or -g 0",
              c.sample_every, c.gen_tokens, token.c_str(), mc.vocab_size);
    }
}

// The token ids of the shard each loader reads first (after a resume: at the resumed position), checked
// before the GPU starts; the shards after it are checked in the background as the loaders reach them.
static void setup_first_shards(Trainer& tr) {
    dataloader_check_upcoming(&tr.train_loader);
    if (tr.have_val) dataloader_check_upcoming(&tr.val_loader);
}

// -h 1 with the eval file on some processes only: none evaluates (every process joins the eval's sums).
static void agree_on_eval(Trainer& tr) {
    if (!tr.cfg.hellaswag || tr.mp.num_processes == 1) return;
    const int P = tr.mp.num_processes;
    const int have = (int)multi_gpu_cpu_float_sum(tr.have_eval ? 1.0f : 0.0f, &tr.mp);
    if (have == 0 || have == P) return;
    if (is_rank0(tr)) printf("note: -h 1 but the eval file is missing on %d of %d processes: training without the eval\n", P - have, P);
    if (tr.have_eval) eval_loader_free(&tr.eval_loader);
    tr.have_eval = false;
}

// Output folder, and the checkpoint to resume from (read and checked on the host).
static void setup_output(Trainer& tr, const GPT2Config& mc) {
    const TrainConfig& c = tr.cfg;
    if (!c.output_dir.empty()) {
        ckpt_make_dir(c.output_dir);
        ckpt_check_writable(c.output_dir);
    }
    if (c.resume) {
        const size_t shard_size = zero_shard_size(mc, c.zero_stage, c.num_processes);
        resume_read(tr, mc, shard_size);
    }
}

// GPU and processes (after everything that can be checked without one): the device, then the
// multi-GPU start-up, which must find the geometry setup_processes planned with.
static const cudaDeviceProp& setup_gpu(Trainer& tr, const GPT2Config& mc) {
    const TrainConfig& c = tr.cfg;
    int device_count = 0;
    if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
        fatal("no CUDA GPU found: train_gpt2cu needs an NVIDIA GPU of compute capability 8.0 or newer");
    }
    tr.mp = multi_gpu_config_init(c.num_processes, c.process_rank, c.gpus_per_node, c.init_method.c_str(),
                                  c.server_ip.c_str(), c.port, c.fs_path.c_str(), c.zero_stage);
    if (tr.mp.num_processes != c.num_processes || tr.mp.process_rank != c.process_rank) {
        fatal("start-up found process %d of %d, but the environment announced %d of %d: check the launcher",
              tr.mp.process_rank, tr.mp.num_processes, c.process_rank, c.num_processes);
    }
    if (c.zero_stage > 0 && c.num_processes == 1 && is_rank0(tr)) {
        printf("note: -z %d with one process shards nothing\n", c.zero_stage);
    }
    if (c.zero_stage == 1 && zero_shard_layout(mc, c.num_processes) == ZeroLayout::padded && is_rank0(tr)) {
        printf("note: -z 1 with %d processes: not every tensor of this model divides by %d, so each process updates "
               "one contiguous 1/%d of all parameters (the padded layout, which llm.c does not have)\n",
               c.num_processes, c.num_processes, c.num_processes);
    }
    GpuContextOptions ctx_opt;
    ctx_opt.allow_tf32 = c.allow_tf32 != 0;
    ctx_opt.autotune = c.matmul_autotune != 0;
    ctx_opt.high_priority = c.overlap_update != 0;
    gpu_context_init(&tr.ctx, ctx_opt);  // on the device multi_gpu_config_init chose
    tr.peak = gpu_peak_bf16_flops(tr.ctx.props);
    return tr.ctx.props;
}

// Model on the GPU: state, weights (random or from -e), activations, then the resume's upload and the
// log. Returns the largest micro-batch the free memory would have taken (for the table).
static int setup_model(Trainer& tr, const ModelChoice& m) {
    TrainConfig& c = tr.cfg;
    if (c.gelu_fusion < 0) c.gelu_fusion = auto_gelu_fusion(tr.ctx.props.major, kFloatXIsBF16, &tr.gelu_fusion_why);
    GPT2Options opt;
    opt.recompute = std::max(c.recompute, 0);  // -1: chosen below, once the free memory is known
    opt.gelu_fusion = c.gelu_fusion;
    opt.use_master_weights = c.master_weights != 0;
    opt.overlap_update = c.overlap_update != 0;
    gpt2_allocate_state(&tr.model, m.mc, opt, &tr.mp, &tr.ctx);
    tr.model.rng_state = 13371337;  // the same on every process: replicas must round identically
    if (m.from_descriptor) {
        const auto t0 = std::chrono::steady_clock::now();
        const int threads = gpt2_init_random(&tr.model, c.seed);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (is_rank0(tr)) {
            printf("init: random weights of %s (%.1fM parameters) in %.1f s on %d threads, seed %u\n", c.init.c_str(),
                   tr.model.num_parameters / 1e6, s, threads, (uint32_t)c.seed);
        }
    } else gpt2_load_params(&tr.model, c.init.c_str(), m.info);
    size_t free_bytes = 0, total_bytes = 0;
    cudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (c.recompute < 0) {
        // per process: recompute levels give the same bits, so processes may differ (GPUs of another size)
        size_t need[3];
        for (int r = 0; r < 3; r++) need[r] = gpt2_activation_bytes(tr.ctx, m.mc, c.B, c.T, r);
        c.recompute = auto_recompute(need, free_bytes, &tr.recompute_why);
        tr.model.opt.recompute = c.recompute;
    }
    const int max_b = gpt2_estimate_max_batch(tr.ctx, m.mc, c.T, c.recompute, free_bytes);
    gpt2_allocate_activations(&tr.model, c.B, c.T);

    if (c.resume) {
        tr.start_step = resume_upload(tr, m.mc);
        tr.resumed = tr.start_step > 0;  // checkpoints exist only of steps >= 1
    }
    logger_init(&tr.logger, c.output_dir.empty() ? nullptr : c.output_dir.c_str(), c.process_rank, tr.start_step);
    tr.sample_rng = rng_seed(c.seed, 1337);
    return max_b;
}

// The start-up table (rank 0). tr is not const: sizing the activations uses the context's LayerNorm
// grid cache, which fills on first use.
static void print_run_table(Trainer& tr, const GPT2Config& mc, const cudaDeviceProp& props, int max_b) {
    const TrainConfig& c = tr.cfg;
    const size_t N = tr.model.num_parameters;
    printf("+-----------------------+----------------------------------------------------+\n");
    printf("| %-21s | %-50s |\n", "Parameter", "Value");
    printf("+-----------------------+----------------------------------------------------+\n");
    auto row_s = [](const char* k, const std::string& v) { printf("| %-21s | %-50s |\n", k, v.c_str()); };
    auto row_i = [](const char* k, long v) { printf("| %-21s | %-50ld |\n", k, v); };
    auto row_f = [](const char* k, double v) { printf("| %-21s | %-50e |\n", k, v); };
    row_s("train data pattern", train_pattern(c));
    if (c.overfit_single_batch) row_s("overfit single batch", "-a 1: the same -j windows every step");
    row_s("val data pattern", tr.have_val ? c.val_pattern : "(none)");
    row_s("output log dir", c.output_dir.empty() ? "(none)" : c.output_dir);
    row_s("init", c.init);
    row_i("micro batch size B", c.B);
    row_i("sequence length T", c.T);
    row_i("total batch size", c.total_batch);
    row_i("gradient accumulation", tr.grad_accum);
    row_s("LR schedule", lr_schedule_name(tr.scheduler.type));
    row_f("learning rate (LR)", c.lr);
    row_i("warmup iterations", c.warmup);
    row_f("final LR fraction", c.final_lr_frac);
    row_f("weight decay", c.weight_decay);
    row_i("max steps", tr.train_num_batches);
    row_i("val loss every", c.val_every);
    row_i("val max steps", c.val_max_steps);
    row_i("val batches", tr.have_val ? tr.val_num_batches : 0);
    row_i("sample every", c.sample_every);
    row_i("genT", c.gen_tokens);
    row_i("checkpoint every", c.checkpoint_every);
    auto with_why = [](int v, const std::string& why) { return std::to_string(v) + (why.empty() ? "" : " (" + why + ")"); };
    row_s("recompute", with_why(c.recompute, tr.recompute_why));
    row_s("gelu fusion", with_why(c.gelu_fusion, tr.gelu_fusion_why));
    row_i("update overlap (-ao)", c.overlap_update);
    row_i("master weights", gpt2_uses_master_weights(&tr.model));
    row_i("zero stage", c.zero_stage);
    row_s("precision", PRECISION_MODE_NAME);
    row_s("attention", gpt2_attention_name());
#ifdef ENABLE_CUDNN
    row_s("cuDNN", cudnn_version_string());
#endif
    printf("+-----------------------+----------------------------------------------------+\n");
    row_s("device", props.name);
    row_s("peak bf16 TFLOP/s", tr.peak.source);
    row_i("processes", c.num_processes);
    row_s("NCCL", tr.mp.use_nccl ? "communicator up (" + c.init_method + " start-up)" : std::string("not used"));
    printf("+-----------------------+----------------------------------------------------+\n");
    const std::pair<const char*, long> model_rows[] = {
        {"max_seq_len", mc.max_seq_len}, {"vocab_size", mc.vocab_size}, {"padded_vocab_size", mc.padded_vocab_size},
        {"num_layers", mc.num_layers},   {"num_heads", mc.num_heads},   {"channels", mc.channels},
        {"num_parameters", (long)N},
    };
    for (const auto& [name, value] : model_rows) row_i(name, value);
    printf("+-----------------------+----------------------------------------------------+\n");
    row_i("train windows/epoch", (long)dataloader_num_batches(&tr.train_loader));
    printf("+-----------------------+----------------------------------------------------+\n");
    printf("memory: parameters+gradients+optimizer %.2f GiB, activations %.2f GiB; "
           "estimated max micro-batch at T=%d with -r %d: %d\n",
           gpt2_state_bytes(mc, gpt2_uses_master_weights(&tr.model), &tr.mp) / 1073741824.0,
           gpt2_activation_bytes(tr.ctx, mc, c.B, c.T, c.recompute) / 1073741824.0, c.T, c.recompute, max_b);
}

// Everything that can be checked without a GPU is checked first, before the first CUDA call: flags
// (exact syntax, ranges) and their combinations, every input file (shard headers and sizes, the token
// ids of the first shard each loader reads against the model's vocabulary; the model file, weights
// included; the checkpoint to resume from: DONE, model file, run state with its optimizer values; eval
// file; tokenizer) and the output folder. Checks that can fail on one rank only run here, before the
// processes find each other (a rank failing after that would leave the others waiting), except the
// token ids of later shards: a bad one stops its rank when that rank reaches the shard, and that rank
// tells the others. Only then CUDA, processes and the model.
static void setup(Trainer& tr) {
    TrainConfig& c = tr.cfg;
    const ModelChoice m = setup_model_config(c);
    require_matches(train_pattern(c), c.overfit_single_batch ? "-j" : "-i");
    tr.have_val = c.val_every > 0 && c.val_max_steps != 0 && !c.val_pattern.empty();  // -m -1: the whole split
    if (tr.have_val) require_matches(c.val_pattern, "-j");
    setup_processes(tr);
    setup_data(tr, m.mc);
    setup_output(tr, m.mc);
    setup_first_shards(tr);

    const cudaDeviceProp& props = setup_gpu(tr, m.mc);
    agree_on_eval(tr);
    const int max_b = setup_model(tr, m);
    if (is_rank0(tr)) print_run_table(tr, m.mc, props, max_b);
}

// ----------------------------------------------------------------------------
// main loop

int main(int argc, char** argv) {
    Trainer tr{};  // value-initialized: the watchdog may read tr.mp before setup fills it
    tr.cfg = parse_args(argc, argv);
    // started before setup, so the collectives of a resume are bounded too
    watchdog_start(&tr.watchdog, tr.cfg.watchdog_s, [&tr] { multi_gpu_abort(&tr.mp); });
    setup(tr);
    const TrainConfig& c = tr.cfg;
    GPT2& model = tr.model;
    signal(SIGINT, on_stop_signal);
    signal(SIGTERM, on_stop_signal);
    Watchdog* wd = &tr.watchdog;
    TrainStep step_cfg;  // the optimizer step (llmc/train_step.cuh)
    step_cfg.B = c.B;
    step_cfg.T = c.T;
    step_cfg.grad_accum = tr.grad_accum;
    step_cfg.weight_decay = c.weight_decay;
    step_cfg.skip_loss_z = c.skip_loss_z;
    step_cfg.skip_norm_z = c.skip_norm_z;
    step_cfg.loss_outlier = &tr.loss_outlier;
    step_cfg.norm_outlier = &tr.norm_outlier;
    step_cfg.stop_flag = &g_stop_signal;
    step_cfg.watchdog = wd;
#ifdef LLMC_TEST_HOOKS
    // test hook, test builds only (dev/test/gpu/multi_gpu_stop_check.sh): the step's vote blocks, as if
    // a peer had died
    const char* hang_env = getenv("LLMC_TEST_HANG_AT_STEP");
    step_cfg.hang_at_step = hang_env != nullptr ? atoi(hang_env) : 0;
#endif

    const double flops_per_token = gpt2_flops_per_token((double)model.num_parameters, model.config.num_layers,
                                                        model.config.channels, c.T);
    cudaEvent_t start_ev, end_ev;
    cudaCheck(cudaEventCreate(&start_ev));
    cudaCheck(cudaEventCreate(&end_ev));
    double total_ms = 0.0;
    int timed_steps = 0;
    TokPerSecAverage tok_per_s_avg;
    GpuMonitor gpu_monitor;
    if (c.gpu_log_every > 0) gpu_monitor_init(&gpu_monitor);
    PhaseTimer phase_timer;
    if (c.phase_timing) {
        phase_timer_init(&phase_timer);
        model.timer = &phase_timer;
    }

    // Leaving the loop is agreed by all ranks through the step's vote (llmc/rank_agreement.h): a rank
    // that left alone would pair its checkpoint barrier with the others' gradient reduces. One process
    // without NCCL also stops on its own flag at once (a signal during val / sampling: no extra step).
    int stop_requests = 0;
    for (int step = tr.start_step; step <= tr.train_num_batches; step++) {
        const bool last_step = step == tr.train_num_batches;
        if (!tr.mp.use_nccl && g_stop_signal != 0) stop_requests = std::max(stop_requests, 1);
        const bool stop_now = stop_requests > 0;  // a signal during the last step: save and leave
        if (!stop_now) {
            WatchdogWait w(wd, step, "evaluation and sampling (val loss / HellaSwag ncclAllReduce)");
            evaluate_and_sample(tr, step, last_step);
        }
        const bool resume_start = tr.resumed && step == tr.start_step;
        if (checkpoint_due(step, last_step, c.checkpoint_every, !c.output_dir.empty(), resume_start) ||
            (stop_now && !c.output_dir.empty() && step > tr.start_step)) {
            WatchdogWait w(wd, step, "the checkpoint (writing, then the ncclAllReduce barrier)");
            save_checkpoint(tr, step);
        }
        if (stop_now) {
            if (is_rank0(tr)) printf("stopping after step %d: SIGINT/SIGTERM reached %d of %d processes%s\n", step,
                                     stop_requests, tr.mp.num_processes,
                                     c.output_dir.empty() ? " (no -o, nothing saved)" : "");
            break;
        }
        if (last_step) break;

        // ---- one optimizer step ----
        phase_timer_end_step(model.timer, model.stream, false);  // drop what val/eval/sampling recorded
        cudaCheck(cudaEventRecord(start_ev, model.stream));
        const float lr = get_learning_rate(&tr.scheduler, step);
        const TrainStepResult res = train_step(&model, step_cfg, step, lr, step + 1 == tr.train_num_batches, [&](int micro) {
            if (micro == 0) dataloader_begin_step(&tr.train_loader, c.overfit_single_batch != 0);  // -a 1: windows 0..accum-1 again
            dataloader_next_batch(&tr.train_loader);
            return StepBatch{tr.train_loader.inputs, tr.train_loader.targets};
        });
        stop_requests = res.stop_requests;
        const float loss = res.loss, norm = res.norm;
        const float zloss = res.loss_z, znorm = res.norm_z;
        watchdog_enter(wd, step + 1, "the AdamW update (ZeRO-1: ncclAllGather)");
        cudaCheck(cudaEventRecord(end_ev, model.stream));
        cudaCheck(cudaEventSynchronize(end_ev));
        watchdog_leave(wd);
        phase_timer_end_step(model.timer, model.stream, step > tr.start_step + 1);  // first two steps: warm-up
        float ms = 0.0f;
        cudaCheck(cudaEventElapsedTime(&ms, start_ev, end_ev));
        if (step > tr.start_step) {  // the first step includes one-time set-up costs
            total_ms += ms;
            timed_steps++;
        }
        const double tokens = (double)c.total_batch;
        const double tok_per_s = tokens / (ms / 1000.0);
        const double mfu = mfu_percent(flops_per_token, tok_per_s, c.num_processes, tr.peak.flops);
        const float tok_per_s_shown = tok_per_sec_update(&tok_per_s_avg, step, (float)tok_per_s);  // as llm.c
        if (is_rank0(tr)) {
            // llmc/step_line.h: the autotune summaries (complete once this first step ran every shape)
            // go before the step line, so that the step lines stay adjacent as llm.c's tools read them
            std::string notes;
            if (step == tr.start_step && c.matmul_autotune) {
                notes = matmul_autotune_summary(tr.ctx) + "\n";
#ifdef ENABLE_CUDNN
                notes += cudnn_autotune_summary(*tr.ctx.cudnn) + "\n";
#endif
            }
            const StepLine line{step + 1, tr.train_num_batches, loss, zloss, norm, znorm, lr, ms, mfu, tok_per_s_shown};
            fputs(step_output(line, notes).c_str(), stdout);
            fflush(stdout);
        }
        logger_log_train(&tr.logger, step, loss, lr, norm);  // "s:<loop index>" as llm.c (logger.h)
        if (c.gpu_log_every > 0 && (step + 1) % c.gpu_log_every == 0 && is_rank0(tr)) gpu_monitor_print(&gpu_monitor);
    }
    if (is_rank0(tr) && timed_steps > 0) {
        size_t free_b = 0, total_b = 0;
        cudaCheck(cudaMemGetInfo(&free_b, &total_b));
        printf("total average iteration time: %f ms (%.0f tok/s); GPU memory in use %.2f GiB\n", total_ms / timed_steps,
               c.total_batch / (total_ms / timed_steps / 1000.0), (total_b - free_b) / 1073741824.0);
    }

#ifdef LLMC_TEST_HOOKS
    // test hook, test builds only (dev/test/gpu/multi_gpu_ranks_check.sh): every rank prints a checksum of its
    // parameters, which data-parallel replicas must share bit for bit
    if (getenv("LLMC_TEST_PARAM_CHECKSUM") != nullptr) {
        std::vector<floatX> params(model.num_parameters);
        cudaCheck(cudaMemcpy(params.data(), model.params_memory, params.size() * sizeof(floatX), cudaMemcpyDeviceToHost));
        Checksum64 ck;
        checksum_init(&ck);
        checksum_update(&ck, params.data(), params.size() * sizeof(floatX));
        printf("rank %d: parameter checksum %016llx\n", tr.mp.process_rank, (unsigned long long)checksum_final(&ck));
    }
#endif
    if (model.timer) {
        if (is_rank0(tr)) {
            phase_timer_print(model.timer);
            if (c.matmul_autotune) matmul_autotune_print(tr.ctx);
        }
        phase_timer_free(model.timer);
        model.timer = nullptr;
    }
    cudaCheck(cudaEventDestroy(start_ev));
    cudaCheck(cudaEventDestroy(end_ev));
    logger_free(&tr.logger);
    if (tr.have_tokenizer) tokenizer_free(&tr.tokenizer);
    dataloader_free(&tr.train_loader);
    if (tr.have_val) dataloader_free(&tr.val_loader);
    if (tr.have_eval) eval_loader_free(&tr.eval_loader);
    gpt2_free(&model);
    gpu_context_free(&tr.ctx);
    {
        WatchdogWait w(wd, tr.train_num_batches, "NCCL shutdown (ncclCommFinalize)");
        multi_gpu_config_free(&tr.mp);
    }
    watchdog_stop(wd);
    return 0;
}
