// LibTorch's module containers: nn::ModuleList (modules by index, registered as "0", "1", ...)
// and nn::ModuleDict (modules by name, in insertion order). Neither has a forward: a model
// iterates over them and calls each module itself.
//
//   nn::ModuleList layers(nn::Linear(4, 8), nn::Linear(8, 8));
//   layers->push_back(nn::Linear(8, 2));
//   for (const auto& m : *layers) x = m->as<nn::Linear>()->forward(x);
//   nn::ModuleDict heads({{"cls", nn::Linear(8, 10).ptr()}, {"box", nn::Linear(8, 4).ptr()}});
//   heads["cls"]->as<nn::Linear>()->forward(x);
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "nn/ordered_dict.h"

namespace sloth::nn {

namespace detail {
// A module handed to a container: a holder, or a shared_ptr to a module.
template <class M>
std::shared_ptr<Module> as_module_ptr(const M& m) {
  if constexpr (is_module_holder_v<M>)
    return m ? holder_impl(m) : nullptr;
  else
    return std::shared_ptr<Module>(m);
}
template <class M>
concept ModuleLike = is_module_holder_v<M> ||
                     std::is_convertible_v<const std::remove_cvref_t<M>&, std::shared_ptr<Module>>;
}  // namespace detail

class ModuleListImpl : public Module {
 public:
  using Iterator = std::vector<std::shared_ptr<Module>>::iterator;
  using ConstIterator = std::vector<std::shared_ptr<Module>>::const_iterator;

  ModuleListImpl() : Module("ModuleList") {}
  template <detail::ModuleLike... M>
    requires(sizeof...(M) > 0)
  explicit ModuleListImpl(const M&... modules) : Module("ModuleList") {
    (push_back(modules), ...);
  }

  template <detail::ModuleLike M>
  void push_back(const M& module) { append(detail::as_module_ptr(module)); }
  // Appends every module of another list (or any range of modules).
  void extend(const ModuleListImpl& other) {
    for (const auto& m : other) append(m);
  }
  template <class Range>
    requires(!std::is_same_v<std::remove_cvref_t<Range>, ModuleListImpl> &&
             requires(const Range& r) { r.begin(); r.end(); })
  void extend(const Range& modules) {
    for (const auto& m : modules) push_back(m);
  }
  // Inserts before `index` (index == size() appends); later modules are renamed.
  template <detail::ModuleLike M>
  void insert(size_t index, const M& module) { insert_at(index, detail::as_module_ptr(module)); }

  size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.empty(); }
  Iterator begin() { return modules_.begin(); }
  Iterator end() { return modules_.end(); }
  ConstIterator begin() const { return modules_.begin(); }
  ConstIterator end() const { return modules_.end(); }
  std::shared_ptr<Module> operator[](size_t index) const { return ptr(index); }
  // The module at `index` (an error naming the size when out of range); typed: null when it
  // is not a T. at<T> is a reference and an error when it is not a T.
  std::shared_ptr<Module> ptr(size_t index) const;
  template <class T>
  std::shared_ptr<T> ptr(size_t index) const { return std::dynamic_pointer_cast<T>(ptr(index)); }
  template <class T>
  T& at(size_t index) const {
    T* t = dynamic_cast<T*>(ptr(index).get());
    if (!t) fail("nn::ModuleList::at: module %d is a %s, not the type asked for", index, ptr(index)->name());
    return *t;
  }

  Tensor forward(const Tensor& x) override;

 private:
  void append(std::shared_ptr<Module> m);
  void insert_at(size_t index, std::shared_ptr<Module> m);
  std::vector<std::shared_ptr<Module>> modules_;
};

class ModuleDictImpl : public Module {
 public:
  using Items = OrderedDict<std::string, std::shared_ptr<Module>>;

  ModuleDictImpl() : Module("ModuleDict") {}
  explicit ModuleDictImpl(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules)
      : Module("ModuleDict") {
    update(modules);
  }
  explicit ModuleDictImpl(const Items& modules) : Module("ModuleDict") { update(modules); }

  // Adds or replaces each (name, module), keeping the first position of a replaced name.
  template <class Range>
  void update(const Range& modules) {
    for (const auto& [name, m] : modules) set(name, m);
  }
  template <detail::ModuleLike M>
  void insert(const std::string& name, const M& module) { set(name, detail::as_module_ptr(module)); }

  size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.empty(); }
  bool contains(const std::string& name) const { return modules_.contains(name); }
  std::vector<std::string> keys() const { return modules_.keys(); }
  std::vector<std::shared_ptr<Module>> values() const { return modules_.values(); }
  const Items& items() const { return modules_; }
  Items::ConstIterator begin() const { return modules_.begin(); }
  Items::ConstIterator end() const { return modules_.end(); }
  // The module named `name` (an error naming the known names when there is none).
  std::shared_ptr<Module> operator[](const std::string& name) const;
  template <class T>
  T& at(const std::string& name) const {
    T* t = dynamic_cast<T*>((*this)[name].get());
    if (!t) fail("nn::ModuleDict::at: module '%s' is a %s, not the type asked for", name, (*this)[name]->name());
    return *t;
  }
  // Removes and returns the module named `name`.
  std::shared_ptr<Module> pop(const std::string& name);
  void clear();

  Tensor forward(const Tensor& x) override;

 private:
  void set(const std::string& name, std::shared_ptr<Module> m);
  void reregister();
  Items modules_{"Module"};
};

class ModuleList : public ModuleHolder<ModuleListImpl> {
 public:
  using ModuleHolder<ModuleListImpl>::ModuleHolder;
  using Impl = ModuleListImpl;
  std::shared_ptr<Module> operator[](size_t index) const { return get()->ptr(index); }
};
class ModuleDict : public ModuleHolder<ModuleDictImpl> {
 public:
  using ModuleHolder<ModuleDictImpl>::ModuleHolder;
  using Impl = ModuleDictImpl;
  ModuleDict() = default;
  // `nn::ModuleDict heads({{"cls", nn::Linear(8, 10).ptr()}, {"box", ...}})`.
  ModuleDict(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules)  // NOLINT
      : ModuleHolder<ModuleDictImpl>(std::make_shared<ModuleDictImpl>(modules)) {}
  std::shared_ptr<Module> operator[](const std::string& name) const { return (*get())[name]; }
};

}  // namespace sloth::nn
