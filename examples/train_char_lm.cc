// A GPT-style character-level language model trained on the word list of Debian's
// `wamerican` package (/usr/share/dict/words, one word per line), then asked for new words.
//
//   ./bazelw run -c opt //examples:train_char_lm
//   ./bazelw run -c opt //examples:train_char_lm -- --steps=3000 --n_layer=4 --temperature=1
//
// The sloth port of tools/char_lm.py (same data split, model, initialization and schedule):
//   data   the words are shuffled (Fisher-Yates driven by splitmix64 seeded with 13, the same
//          order as the Python script; the file is sorted, and sorted neighbours share prefixes
//          a model would learn to copy), then word i goes to validation when i % 10 == 9, to
//          training otherwise; each set is its words joined by "\n". The vocabulary is the file's characters (Unicode code points)
//          plus "\n". A training sequence is a random contiguous chunk of T+1 characters.
//   model  token + position embeddings, n_layer pre-norm blocks x += attn(ln1(x)),
//          x += mlp(ln2(x)) with causal self-attention (scaled_dot_product_attention,
//          is_causal) and a GELU MLP d -> 4d -> d, a final LayerNorm, and the token embedding
//          as the output projection (weight tying). Weights N(0, 0.02), biases 0.
//   train  AdamW (betas 0.9/0.95, weight decay 0.01), linear warmup then cosine decay to lr/10,
//          gradients clipped to norm 1.0. Each step (forward, loss, backward, clipping, update)
//          is one graph; the learning rate is data, so the schedule never replans.
// Defaults (d=128, 4 heads, 2 layers, T=64, batch 32, 1000 steps, lr 3e-3) reached validation
// loss 2.066 (train 2.076; uniform is 4.25) on a shared 2-core machine; tools/char_lm.py, the
// same model in PyTorch 1.13, reached 2.066 too (train 2.080).
// It prints train and validation loss every --eval_every steps with the tokens per second,
// saves a checkpoint (the vocabulary is in its metadata), and samples --samples words with
// --temperature and --top_k (topk + multinomial, seeded with --seed).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "examples/example_util.h"
#include "nn/nn.h"
#include "sloth/sloth.h"

ABSL_FLAG(std::string, data, "/usr/share/dict/words", "word list, one word per line (UTF-8)");
ABSL_FLAG(int, d_model, 128, "embedding width");
ABSL_FLAG(int, n_head, 4, "attention heads");
ABSL_FLAG(int, n_layer, 2, "transformer blocks");
ABSL_FLAG(int, block_size, 64, "context length T (characters)");
ABSL_FLAG(int, batch_size, 32, "sequences per step");
ABSL_FLAG(int, steps, 1000, "training steps");
ABSL_FLAG(int, warmup, 100, "linear warmup steps");
ABSL_FLAG(double, lr, 3e-3, "peak learning rate (cosine-decayed to lr/10 at --steps)");
ABSL_FLAG(double, weight_decay, 0.01, "AdamW decoupled weight decay");
ABSL_FLAG(double, clip, 1.0, "gradient clipping: the largest total gradient norm");
ABSL_FLAG(int, eval_every, 250, "report train/validation loss every N steps");
ABSL_FLAG(int, eval_batches, 20, "validation batches (fixed) per report");
ABSL_FLAG(int, samples, 10, "words to sample at the end");
ABSL_FLAG(double, temperature, 0.8, "sampling temperature");
ABSL_FLAG(int, top_k, 10, "sample among the k most likely characters (0: all)");
ABSL_FLAG(uint64_t, seed, 0, "random seed (initialization, batches, sampling)");
ABSL_FLAG(std::string, device, "cpu", "device: cpu or cuda[:N]");
ABSL_FLAG(std::string, checkpoint, "char_lm.safetensors",
          "checkpoint path (the optimizer state goes to <path>.optim)");

using namespace sloth;
using examples::Clock;
using examples::seconds_since;

namespace {

// ---- text: UTF-8 <-> code points ----
std::u32string decode_utf8(const std::string& s, const std::string& what) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size())
      throw Error(what + ": invalid UTF-8 at byte " + std::to_string(i));
    char32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
    i += n;
  }
  return out;
}

std::string encode_utf8(char32_t cp) {
  std::string o;
  if (cp < 0x80) {
    o += char(cp);
  } else if (cp < 0x800) {
    o += char(0xc0 | (cp >> 6));
    o += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    o += char(0xe0 | (cp >> 12));
    o += char(0x80 | ((cp >> 6) & 0x3f));
    o += char(0x80 | (cp & 0x3f));
  } else {
    o += char(0xf0 | (cp >> 18));
    o += char(0x80 | ((cp >> 12) & 0x3f));
    o += char(0x80 | ((cp >> 6) & 0x3f));
    o += char(0x80 | (cp & 0x3f));
  }
  return o;
}

// splitmix64 (one step): a tiny generator that tools/char_lm.py reproduces bit for bit.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <class T>
void shuffle_words(std::vector<T>& words, uint64_t seed = 13) {
  uint64_t state = seed;
  for (size_t i = words.size() - 1; i > 0; --i) std::swap(words[i], words[splitmix64(state) % (i + 1)]);
}

struct Corpus {
  std::vector<char32_t> vocab;          // sorted; contains '\n'
  std::vector<int64_t> train, val;      // token ids
  int64_t words = 0;
};

Corpus load_words(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw Error("cannot open '" + path + "' (install Debian's wamerican package: "
                "apt-get install wamerican, or pass --data)");
  std::stringstream ss;
  ss << f.rdbuf();
  std::u32string text = decode_utf8(ss.str(), path);
  std::vector<std::u32string> words;
  for (size_t i = 0; i < text.size();) {
    size_t j = text.find(U'\n', i);
    if (j == std::u32string::npos) j = text.size();
    if (j > i) words.push_back(text.substr(i, j - i));
    i = j + 1;
  }
  if (words.size() < 20) throw Error("'" + path + "': too few words to train on");
  shuffle_words(words);
  Corpus c;
  c.words = int64_t(words.size());
  std::vector<bool> seen(0x110000, false);
  seen[U'\n'] = true;
  for (const auto& w : words)
    for (char32_t ch : w) seen[ch] = true;
  std::map<char32_t, int64_t> id;
  for (char32_t ch = 0; ch < seen.size(); ++ch)
    if (seen[ch]) {
      id[ch] = int64_t(c.vocab.size());
      c.vocab.push_back(ch);
    }
  for (size_t i = 0; i < words.size(); ++i) {
    auto& dst = i % 10 == 9 ? c.val : c.train;
    for (char32_t ch : words[i]) dst.push_back(id[ch]);
    dst.push_back(id[U'\n']);
  }
  return c;
}

// B random contiguous chunks of T+1 tokens: inputs [B, T] and targets [B, T] (int64).
std::pair<Tensor, Tensor> random_batch(const std::vector<int64_t>& data, int64_t B, int64_t T,
                                       std::mt19937_64& rng, Device device) {
  std::uniform_int_distribution<int64_t> start(0, int64_t(data.size()) - T - 2);
  std::vector<int64_t> x(B * T), y(B * T);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = start(rng);
    std::copy_n(data.begin() + s, T, x.begin() + b * T);
    std::copy_n(data.begin() + s + 1, T, y.begin() + b * T);
  }
  return {from_vector(x, {B, T}).to(device), from_vector(y, {B, T}).to(device)};
}

// ---- the model ----
class Block : public nn::Module {
 public:
  Block(int64_t d, int64_t n_head) : Module("Block"), d_(d), h_(n_head) {
    ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(Shape{d}));
    qkv = register_module("qkv", std::make_shared<nn::Linear>(d, 3 * d));
    proj = register_module("proj", std::make_shared<nn::Linear>(d, d));
    ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(Shape{d}));
    fc = register_module("fc", std::make_shared<nn::Linear>(d, 4 * d));
    fc_out = register_module("fc_out", std::make_shared<nn::Linear>(4 * d, d));
  }
  Tensor attn(const Tensor& x) {
    const int64_t B = x.size(0), T = x.size(1);
    std::vector<Tensor> parts = qkv->forward(x).split(d_, 2);
    auto heads = [&](const Tensor& t) { return t.view({B, T, h_, d_ / h_}).transpose(1, 2); };
    Tensor y = scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]),
                                            /*attn_mask=*/{}, /*dropout_p=*/0,
                                            /*is_causal=*/true);
    return proj->forward(y.transpose(1, 2).reshape({B, T, d_}));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x + attn(ln1->forward(x));
    return h + fc_out->forward(gelu(fc->forward(ln2->forward(h))));
  }
  std::shared_ptr<nn::LayerNorm> ln1, ln2;
  std::shared_ptr<nn::Linear> qkv, proj, fc, fc_out;

 private:
  int64_t d_, h_;
};

class CharGpt : public nn::Module {
 public:
  CharGpt(int64_t vocab, int64_t d, int64_t n_head, int64_t n_layer, int64_t T)
      : Module("CharGpt") {
    tok = register_module("tok", nn::Embedding(vocab, d));
    pos = register_module("pos", nn::Embedding(T, d));
    blocks = register_module("blocks", std::make_shared<nn::Sequential>());
    for (int64_t i = 0; i < n_layer; ++i) blocks->push_back(std::make_shared<Block>(d, n_head));
    ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(Shape{d}));
    // GPT-2's initialization: every weight matrix N(0, 0.02), biases 0 (LayerNorms keep 1/0).
    NoGradGuard g;
    for (auto& [name, p] : named_parameters()) {
      const bool norm = name.find("ln") != std::string::npos;
      if (norm) continue;
      if (p.dim() == 2) p.copy_(randn(p.shape()) * 0.02);
      else p.zero_();
    }
  }
  // idx [B, T] int64 -> logits [B, T, vocab].
  Tensor forward(const Tensor& idx) override {
    const int64_t T = idx.size(1);
    Tensor x = tok->forward(idx) + pos->forward(arange(T, TensorOptions(kInt64).device(idx.device())));
    x = ln_f->forward(blocks->forward(x));
    return matmul(x, tok->weight.t());   // weight tying
  }
  nn::Embedding tok{nullptr}, pos{nullptr};
  std::shared_ptr<nn::Sequential> blocks;
  std::shared_ptr<nn::LayerNorm> ln_f;
};

double lr_at(int64_t step, int64_t steps, int64_t warmup, double lr) {
  if (step < warmup) return lr * double(step + 1) / double(warmup);
  double p = double(step - warmup) / double(std::max<int64_t>(1, steps - warmup));
  return lr / 10 + (lr - lr / 10) * 0.5 * (1 + std::cos(M_PI * std::min(p, 1.0)));
}

Tensor lm_loss(CharGpt& model, const Tensor& x, const Tensor& y) {
  Tensor logits = model.forward(x);
  const int64_t V = logits.size(2);
  return cross_entropy(logits.reshape({-1, V}), y.reshape({-1}));
}

double validation_loss(CharGpt& model, const std::vector<std::pair<Tensor, Tensor>>& batches) {
  NoGradGuard g;
  model.eval();
  Tensor sum = zeros({});
  for (const auto& [x, y] : batches) {
    sum = sum + lm_loss(model, x, y);
    mark_step();
  }
  model.train();
  return sum.item() / double(batches.size());
}

// Samples n words: starts from "\n", feeds the last T characters, draws each next character
// from softmax(logits / temperature) restricted to the top_k most likely ones.
std::vector<std::string> sample_words(CharGpt& model, const std::vector<char32_t>& vocab,
                                      int n, int64_t T, double temperature, int top_k,
                                      Device device) {
  NoGradGuard g;
  model.eval();
  const int64_t nl = std::find(vocab.begin(), vocab.end(), U'\n') - vocab.begin();
  std::vector<int64_t> ctx = {nl};
  std::vector<std::string> words;
  std::string cur;
  while (int(words.size()) < n) {
    const int64_t len = std::min<int64_t>(T, int64_t(ctx.size()));
    std::vector<int64_t> window(ctx.end() - len, ctx.end());
    Tensor logits = model.forward(from_vector(window, {1, len}).to(device))
                        .select(0, 0).select(0, len - 1) / temperature;
    if (top_k > 0 && top_k < int64_t(vocab.size())) {
      auto [values, indices] = topk(logits, top_k);
      logits = logits.masked_fill(logits < values.select(0, top_k - 1),
                                  -std::numeric_limits<double>::infinity());
    }
    Tensor next = multinomial(softmax(logits, 0), 1);
    const int64_t c = int64_t(next.item());
    ctx.push_back(c);
    if (c == nl) {
      if (!cur.empty()) words.push_back(cur);
      cur.clear();
    } else {
      cur += encode_utf8(vocab[c]);
    }
  }
  model.train();
  return words;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  try {
    const int64_t T = absl::GetFlag(FLAGS_block_size), B = absl::GetFlag(FLAGS_batch_size);
    const int64_t d = absl::GetFlag(FLAGS_d_model), n_head = absl::GetFlag(FLAGS_n_head);
    const int64_t steps = absl::GetFlag(FLAGS_steps), warmup = absl::GetFlag(FLAGS_warmup);
    const int64_t eval_every = std::max(1, absl::GetFlag(FLAGS_eval_every));
    const double lr = absl::GetFlag(FLAGS_lr);
    const uint64_t seed = absl::GetFlag(FLAGS_seed);
    const std::string ckpt = absl::GetFlag(FLAGS_checkpoint);
    const Device device = examples::parse_device(absl::GetFlag(FLAGS_device));
    const bool tty = isatty(fileno(stdout));
    if (T < 1 || B < 1 || d < 1 || n_head < 1 || d % n_head != 0 || steps < 1)
      throw Error("flags: need block_size, batch_size, steps >= 1 and d_model divisible by "
                  "n_head (got d_model " + std::to_string(d) + ", n_head " +
                  std::to_string(n_head) + ")");

    auto t_load = Clock::now();
    Corpus corpus = load_words(absl::GetFlag(FLAGS_data));
    const int64_t V = int64_t(corpus.vocab.size());
    printf("%s: %lld words, vocabulary %lld characters; %zu training and %zu validation "
           "characters (loaded in %.1fs)\n",
           absl::GetFlag(FLAGS_data).c_str(), (long long)corpus.words, (long long)V,
           corpus.train.size(), corpus.val.size(), seconds_since(t_load));

    manual_seed(seed);
    auto model = std::make_shared<CharGpt>(V, d, n_head, absl::GetFlag(FLAGS_n_layer), T);
    model->to(device);
    optim::AdamW opt(model->parameters(), {.lr = lr, .beta1 = 0.9, .beta2 = 0.95,
                                           .weight_decay = absl::GetFlag(FLAGS_weight_decay)});
    int64_t n_params = 0;
    for (const Tensor& p : model->parameters()) n_params += p.numel();
    printf("model: d=%lld, %lld heads, %d layers, T=%lld, batch %lld: %lld parameters; AdamW "
           "lr %g (warmup %lld, cosine to lr/10), clip %g; %lld steps\n",
           (long long)d, (long long)n_head, absl::GetFlag(FLAGS_n_layer), (long long)T,
           (long long)B, (long long)n_params, lr, (long long)warmup, absl::GetFlag(FLAGS_clip),
           (long long)steps);

    std::mt19937_64 val_rng(1234), rng(seed);
    std::vector<std::pair<Tensor, Tensor>> val_batches;
    for (int i = 0; i < absl::GetFlag(FLAGS_eval_batches); ++i)
      val_batches.push_back(random_batch(corpus.val, B, T, val_rng, device));
    printf("step 0: val loss %.4f (uniform: %.4f)\n", validation_loss(*model, val_batches),
           std::log(double(V)));
    fflush(stdout);

    reset_metrics();
    double train_s = 0;
    Tensor loss_sum = zeros({}).to(device);
    int64_t loss_n = 0;
    auto t_period = Clock::now();
    for (int64_t step = 0; step < steps; ++step) {
      opt.set_lr(lr_at(step, steps, warmup, lr));
      auto [x, y] = random_batch(corpus.train, B, T, rng, device);
      Tensor loss = lm_loss(*model, x, y);
      opt.zero_grad();
      loss.backward();
      nn::clip_grad_norm_(model->parameters(), absl::GetFlag(FLAGS_clip));
      opt.step();
      {
        NoGradGuard g;
        loss_sum = loss_sum + loss.detach();
      }
      mark_step();   // forward + backward + clipping + update: one graph
      ++loss_n;
      const bool report = (step + 1) % eval_every == 0 || step + 1 == steps;
      if (tty && ((step + 1) % 10 == 0 || report)) {
        const double el = train_s + seconds_since(t_period);
        char rate[64];
        snprintf(rate, sizeof rate, "%.0f tokens/s", (step + 1) * B * T / el);
        examples::progress_bar("train", step + 1, steps, loss.item(), rate,
                               (steps - step - 1) * el / (step + 1));
      }
      if (report) {
        const double mean_loss = loss_sum.item() / double(loss_n);   // syncs the step
        train_s += seconds_since(t_period);
        const double vl = validation_loss(*model, val_batches);
        if (tty) printf("\n");
        printf("step %lld: train loss %.4f, val loss %.4f, lr %.2e, %.0f tokens/s\n",
               (long long)(step + 1), mean_loss, vl, lr_at(step, steps, warmup, lr),
               (step + 1) * B * T / train_s);
        fflush(stdout);
        loss_sum = zeros({}).to(device);
        loss_n = 0;
        t_period = Clock::now();
      }
    }
    printf("trained %lld steps in %.1fs: %.0f tokens/s (%.1f ms/step)\n", (long long)steps,
           train_s, steps * B * T / train_s, 1e3 * train_s / steps);
    examples::print_runtime_metrics();

    std::string vocab_utf8;
    for (char32_t c : corpus.vocab) vocab_utf8 += encode_utf8(c);
    nn::save(*model, ckpt,
             {{"model", "CharGpt"}, {"d_model", std::to_string(d)},
              {"n_head", std::to_string(n_head)},
              {"n_layer", std::to_string(absl::GetFlag(FLAGS_n_layer))},
              {"block_size", std::to_string(T)}, {"vocab", vocab_utf8},
              {"steps", std::to_string(steps)}});
    opt.save(ckpt + ".optim");
    printf("checkpoint: %s (optimizer state: %s.optim)\n", ckpt.c_str(), ckpt.c_str());

    manual_seed(seed);
    const double temperature = absl::GetFlag(FLAGS_temperature);
    const int top_k = absl::GetFlag(FLAGS_top_k);
    auto t_sample = Clock::now();
    std::vector<std::string> words = sample_words(*model, corpus.vocab, absl::GetFlag(FLAGS_samples),
                                                  T, temperature, top_k, device);
    printf("samples (temperature %g, top_k %d, %.1fs):", temperature, top_k,
           seconds_since(t_sample));
    for (const auto& w : words) printf(" %s", w.c_str());
    printf("\n");
    return 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
