// The main job: train an MLP on Fashion-MNIST with AdamW on the CPU.
//
//   ./bazelw run //examples:train_fashion_mnist -- --epochs=5
//
// Each step records forward, loss, backward and the optimizer update, then mark_step() runs
// them as ONE graph (a plan-cache hit from the third step on). The loss is read with item()
// only every --log_every steps, so the loop does not wait for each step's result.
//
// Defaults (784-256-128-10, AdamW lr 3e-3 cosine-annealed per step, weight decay 1e-2,
// batch 128, standardized pixels) reached 89.1% test accuracy after 5 epochs (88.9% with
// --seed=1) at 2.3-4 s per epoch on a shared 2-core machine (4 plans compiled in all).
// --resume continues from --checkpoint and <checkpoint>.optim at the saved step; with the
// same --epochs it replays the uninterrupted run (the schedule spans --epochs).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "nn/nn.h"
#include "sloth/sloth.h"

ABSL_FLAG(int, epochs, 5, "number of training epochs");
ABSL_FLAG(int, batch_size, 128, "training batch size");
ABSL_FLAG(double, lr, 3e-3, "AdamW learning rate (cosine-annealed to 0 over the run)");
ABSL_FLAG(double, weight_decay, 1e-2, "AdamW decoupled weight decay");
ABSL_FLAG(std::string, hidden, "256,128", "hidden layer sizes, comma-separated");
ABSL_FLAG(uint64_t, seed, 0, "random seed (initialization and shuffling)");
ABSL_FLAG(std::string, device, "cpu", "device: cpu or cuda[:N]");
ABSL_FLAG(bool, normalize, true, "standardize pixels with the training set's mean and std");
ABSL_FLAG(std::string, data, "/usr/share/datasets/fashion-mnist", "Fashion-MNIST directory");
ABSL_FLAG(std::string, checkpoint, "fashion_mnist.safetensors",
          "checkpoint path (the optimizer state goes to <path>.optim)");
ABSL_FLAG(bool, resume, false, "resume from --checkpoint (model, optimizer, epoch)");
ABSL_FLAG(int, log_every, 50, "read the loss (a sync) every N steps");

using namespace sloth;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<int64_t> parse_sizes(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    try {
      out.push_back(std::stoll(item));
    } catch (...) {
      throw Error("--hidden: '" + s + "' is not a comma-separated list of sizes");
    }
    if (out.back() <= 0) throw Error("--hidden: sizes must be positive, got '" + s + "'");
  }
  return out;
}

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s.rfind("cuda", 0) == 0) {
    int index = s.size() > 5 && s[4] == ':' ? std::stoi(s.substr(5)) : 0;
    if (!cuda_is_available())
      throw Error("--device=" + s + ": CUDA is not available (build with --config=cuda on a "
                  "machine with a GPU), use --device=cpu");
    return Device::cuda(index);
  }
  throw Error("--device: expected cpu or cuda[:N], got '" + s + "'");
}

std::string format_time(double s) {
  char buf[32];
  if (s >= 60) snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  else snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

void progress_bar(int epoch, int epochs, int64_t done, int64_t total, double loss, double rate,
                  double eta) {
  const int width = 30;
  int filled = int(width * done / std::max<int64_t>(total, 1));
  std::string bar(filled, '=');
  if (filled < width) bar += '>' + std::string(width - filled - 1, ' ');
  printf("\repoch %d/%d [%s] %lld/%lld  loss %.4f  %.0f samples/s  ETA %s   ", epoch, epochs,
         bar.c_str(), (long long)done, (long long)total, loss, rate, format_time(eta).c_str());
  fflush(stdout);
}

// Accuracy of `model` on `data` (argmax), evaluated in batches without grad.
double evaluate(nn::Module& model, const data::Dataset& ds, Device device) {
  NoGradGuard g;
  model.eval();
  data::DataLoader loader(ds, 1000, /*shuffle=*/false);
  Tensor correct = zeros({}, TensorOptions(kInt64));
  for (auto& b : loader) {
    Tensor x = b.x.to(device), y = b.y.to(device);
    Tensor pred = argmax(model.forward(x), 1);
    correct = correct + sum(pred == y).to(kInt64);
    mark_step();
  }
  model.train();
  return correct.item() / double(ds.size());
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  try {
    const int epochs = absl::GetFlag(FLAGS_epochs);
    const int batch_size = absl::GetFlag(FLAGS_batch_size);
    const int log_every = std::max(1, absl::GetFlag(FLAGS_log_every));
    const std::string ckpt = absl::GetFlag(FLAGS_checkpoint);
    const std::string optim_ckpt = ckpt + ".optim";
    const Device device = parse_device(absl::GetFlag(FLAGS_device));
    const bool tty = isatty(fileno(stdout));

    auto t_load = Clock::now();
    data::FashionMnist train_set(absl::GetFlag(FLAGS_data), /*train=*/true,
                                absl::GetFlag(FLAGS_normalize));
    data::FashionMnist test_set(absl::GetFlag(FLAGS_data), /*train=*/false,
                               absl::GetFlag(FLAGS_normalize));
    printf("Fashion-MNIST: %lld training and %lld test images (loaded in %.1fs)\n",
           (long long)train_set.size(), (long long)test_set.size(), seconds_since(t_load));

    manual_seed(absl::GetFlag(FLAGS_seed));
    std::vector<int64_t> sizes = {784};
    for (int64_t h : parse_sizes(absl::GetFlag(FLAGS_hidden))) sizes.push_back(h);
    sizes.push_back(10);
    auto model = std::make_shared<nn::MLP>(sizes);
    model->to(device);
    optim::AdamW opt(model->parameters(), {.lr = absl::GetFlag(FLAGS_lr),
                                           .weight_decay = absl::GetFlag(FLAGS_weight_decay)});
    data::DataLoader loader(train_set, batch_size, /*shuffle=*/true, absl::GetFlag(FLAGS_seed),
                            /*drop_last=*/true);
    const int64_t steps_per_epoch = loader.num_batches();
    optim::CosineAnnealingLR schedule(opt, int64_t(epochs) * steps_per_epoch);

    int start_epoch = 0;
    if (absl::GetFlag(FLAGS_resume)) {
      if (!std::filesystem::exists(ckpt) || !std::filesystem::exists(optim_ckpt))
        throw Error("--resume: no checkpoint at '" + ckpt + "' (and '" + optim_ckpt + "')");
      nn::load(*model, ckpt);
      opt.load(optim_ckpt);
      start_epoch = int(opt.step_count() / steps_per_epoch);
      schedule.set_epoch(opt.step_count());
      printf("resumed from %s at epoch %d (step %lld)\n", ckpt.c_str(), start_epoch,
             (long long)opt.step_count());
    }
    printf("model: MLP %s, %zu parameter tensors; AdamW lr=%g wd=%g, cosine schedule; batch %d\n",
           absl::GetFlag(FLAGS_hidden).c_str(), model->parameters().size(), opt.lr(),
           absl::GetFlag(FLAGS_weight_decay), batch_size);

    reset_metrics();
    double total_train_s = 0;
    int trained_epochs = 0;
    for (int epoch = start_epoch; epoch < epochs; ++epoch) {
      loader.set_epoch(epoch);
      auto t0 = Clock::now();
      int64_t step = 0;
      double last_loss = 0, loss_sum = 0;
      int64_t loss_reads = 0;
      for (auto& batch : loader) {
        Tensor x = batch.x.to(device), y = batch.y.to(device);
        Tensor loss = cross_entropy(model->forward(x), y);
        opt.zero_grad();
        loss.backward();
        opt.step();
        schedule.step();
        mark_step();  // forward + backward + update: one graph
        ++step;
        if (step % log_every == 0 || step == steps_per_epoch) {
          last_loss = loss.item();  // already computed: no extra graph
          loss_sum += last_loss;
          ++loss_reads;
          if (tty) {
            double el = seconds_since(t0);
            double rate = step * batch_size / el;
            progress_bar(epoch + 1, epochs, step, steps_per_epoch, last_loss, rate,
                         (steps_per_epoch - step) * el / step);
          }
        }
      }
      const double train_s = seconds_since(t0);
      total_train_s += train_s;
      ++trained_epochs;
      auto te = Clock::now();
      const double acc = evaluate(*model, test_set, device);
      const double eval_s = seconds_since(te);
      if (tty) printf("\n");
      printf("epoch %d/%d: train loss %.4f (mean of sampled steps), test accuracy %.2f%%, "
             "%.2fs/epoch (%.0f samples/s), eval %.2fs\n",
             epoch + 1, epochs, loss_sum / std::max<int64_t>(loss_reads, 1), 100 * acc, train_s,
             steps_per_epoch * batch_size / train_s, eval_s);
      fflush(stdout);
      nn::save(*model, ckpt, {{"epoch", std::to_string(epoch + 1)}, {"model", "MLP"},
                              {"hidden", absl::GetFlag(FLAGS_hidden)}});
      opt.save(optim_ckpt);
    }
    if (trained_epochs == 0) {
      printf("nothing to train (already at epoch %d of %d)\n", start_epoch, epochs);
    }
    const double acc = evaluate(*model, test_set, device);
    printf("\nfinal test accuracy: %.2f%% on %lld images\n", 100 * acc, (long long)test_set.size());
    if (trained_epochs)
      printf("time per epoch: %.2fs (mean of %d)\n", total_train_s / trained_epochs, trained_epochs);
    Metrics m = metrics();
    printf("runtime: plans compiled (cache misses) %lld, plan cache hits %lld, graphs %lld\n",
           (long long)m.plan_cache_misses, (long long)m.plan_cache_hits,
           (long long)m.graphs_executed);
    printf("metrics: %s\n", m.to_string().c_str());
    printf("checkpoint: %s (optimizer state: %s)\n", ckpt.c_str(), optim_ckpt.c_str());
    return 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
