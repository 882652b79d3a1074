// LibTorch's module containers as LibTorch code uses them: nn::ModuleList (a stack of layers
// walked by a hand-written forward) and nn::ModuleDict (modules by name): registration names,
// parameters, printing, insert/extend/pop, training through them, and the errors.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "sloth/sloth.h"
#include "tests/support/errors.h"

namespace {

using namespace sloth;

std::vector<std::string> param_names(const nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& p : m.named_parameters()) out.push_back(p.key());
  return out;
}

struct StackImpl : nn::Module {
  StackImpl() : Module("Stack") {
    layers = register_module("layers", nn::ModuleList(nn::Linear(2, 3), nn::Linear(3, 3)));
    layers->push_back(nn::Linear(3, 1));
  }
  Tensor forward(Tensor x) {
    for (size_t i = 0; i < layers->size(); ++i) {
      x = layers[i]->as<nn::Linear>()->forward(x);
      if (i + 1 < layers->size()) x = relu(x);
    }
    return x;
  }
  nn::ModuleList layers{nullptr};
};
SLOTH_MODULE(Stack);

TEST(ModuleList, RegistersByPositionAndTrainsThroughAHandWrittenForward) {
  manual_seed(0);
  Stack net;
  EXPECT_EQ(param_names(*net), (std::vector<std::string>{
                                   "layers.0.weight", "layers.0.bias", "layers.1.weight",
                                   "layers.1.bias", "layers.2.weight", "layers.2.bias"}));
  EXPECT_EQ(net->layers->size(), 3u);
  int linears = 0;
  for (const auto& m : *net->layers) linears += m->is<nn::LinearImpl>();
  EXPECT_EQ(linears, 3);
  EXPECT_EQ(net->layers->at<nn::LinearImpl>(2).weight.shape(), (Shape{1, 3}));
  EXPECT_EQ(net->layers->ptr<nn::LinearImpl>(1)->weight.shape(), (Shape{3, 3}));
  // Training through it: SGD on a fixed target lowers the loss.
  optim::SGD opt(net->parameters(), 0.1);
  const Tensor x = tensor({1, 2, -1, 0.5, 0, 1}, {3, 2});
  const Tensor y = tensor({1, -1, 0.5}, {3, 1});
  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    opt.zero_grad();
    const Tensor loss = mse_loss(net->forward(x), y, kMean);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, 0.5 * first);
  std::ostringstream s;
  s << net->layers;
  EXPECT_EQ(s.str(), "ModuleList(\n  (0): Linear(in_features=2, out_features=3, bias=true)\n"
                     "  (1): Linear(in_features=3, out_features=3, bias=true)\n"
                     "  (2): Linear(in_features=3, out_features=1, bias=true)\n)");
}

TEST(ModuleList, InsertAndExtendRenameAndErrorsChangeNothing) {
  nn::ModuleList list(nn::Linear(1, 1), nn::ReLU());
  list->insert(1, nn::Dropout(0.5));
  std::vector<std::string> names;
  for (const auto& c : list->named_children()) names.push_back(c.key() + ":" + c.value()->name());
  EXPECT_EQ(names, (std::vector<std::string>{"0:Linear", "1:Dropout", "2:ReLU"}));
  nn::ModuleList more(nn::Tanh{});
  list->extend(*more);
  EXPECT_EQ(list->size(), 4u);
  EXPECT_EQ(list[3]->name(), "Tanh");
  EXPECT_ERROR_HAS(list[9], "index 9 is out of range for a ModuleList of 4 modules");
  EXPECT_ERROR_HAS(list->insert(7, nn::ReLU()), "insert at 0..4");
  EXPECT_ERROR_HAS(list->forward(zeros({1})), "has no forward");
  EXPECT_ERROR_HAS(list->at<nn::LinearImpl>(2), "not the type asked for");
  EXPECT_EQ(list->size(), 4u);
}

TEST(ModuleDict, NamesModulesKeepsOrderReplacesAndPops) {
  nn::ModuleDict heads({{"cls", nn::Linear(4, 3).ptr()}, {"box", nn::Linear(4, 2).ptr()}});
  heads->insert("act", nn::ReLU());
  EXPECT_EQ(heads->keys(), (std::vector<std::string>{"cls", "box", "act"}));
  EXPECT_EQ(param_names(*heads), (std::vector<std::string>{"cls.weight", "cls.bias",
                                                           "box.weight", "box.bias"}));
  const Tensor x = ones({5, 4});
  EXPECT_EQ(heads["cls"]->as<nn::Linear>()->forward(x).shape(), (Shape{5, 3}));
  EXPECT_EQ(heads->at<nn::LinearImpl>("box").forward(x).shape(), (Shape{5, 2}));
  // Replacing keeps the name's position; popping removes its parameters.
  heads->update(std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>>{
      {"cls", nn::Linear(4, 7).ptr()}});
  EXPECT_EQ(heads->keys(), (std::vector<std::string>{"cls", "box", "act"}));
  EXPECT_EQ(heads->at<nn::LinearImpl>("cls").weight.shape(), (Shape{7, 4}));
  const auto box = heads->pop("box");
  EXPECT_EQ(box->name(), "Linear");
  EXPECT_EQ(param_names(*heads), (std::vector<std::string>{"cls.weight", "cls.bias"}));
  EXPECT_FALSE(heads->contains("box"));
  int items = 0;
  for (const auto& item : *heads) items += !item.key().empty();
  EXPECT_EQ(items, 2);
  EXPECT_ERROR_HAS(heads["bxo"], "no module named 'bxo' (it holds: cls, act)");
  heads->clear();
  EXPECT_TRUE(heads->is_empty());
  EXPECT_TRUE(heads->parameters().empty());
}

}  // namespace
