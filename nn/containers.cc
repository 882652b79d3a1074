#include "nn/containers.h"

#include "absl/strings/str_join.h"

namespace sloth::nn {

void ModuleListImpl::append(std::shared_ptr<Module> m) {
  if (!m) fail("nn::ModuleList::push_back: module %d is null (an empty holder?)", modules_.size());
  add_child(std::to_string(modules_.size()), m);
  modules_.push_back(std::move(m));
}

void ModuleListImpl::insert_at(size_t index, std::shared_ptr<Module> m) {
  if (index > modules_.size())
    fail("nn::ModuleList::insert: index %d is out of range for a ModuleList of %d modules "
         "(insert at 0..%d)", index, modules_.size(), modules_.size());
  if (!m) fail("nn::ModuleList::insert: the module is null (an empty holder?)");
  modules_.insert(modules_.begin() + static_cast<std::ptrdiff_t>(index), std::move(m));
  // The names are positions, so every later module is registered again under its new one.
  clear_children();
  for (size_t i = 0; i < modules_.size(); ++i) add_child(std::to_string(i), modules_[i]);
}

std::shared_ptr<Module> ModuleListImpl::ptr(size_t index) const {
  if (index >= modules_.size())
    fail("nn::ModuleList: index %d is out of range for a ModuleList of %d modules", index,
         modules_.size());
  return modules_[index];
}

Tensor ModuleListImpl::forward(const Tensor&) {
  fail("nn::ModuleList has no forward (as in LibTorch): iterate over it and call each module, "
       "or use nn::Sequential to chain them");
}

std::shared_ptr<Module> ModuleDictImpl::operator[](const std::string& name) const {
  if (const auto* m = modules_.find(name)) return *m;
  fail("nn::ModuleDict: no module named '%s' (it holds: %s)", name,
       absl::StrJoin(modules_.keys(), ", "));
}

void ModuleDictImpl::set(const std::string& name, std::shared_ptr<Module> m) {
  if (!m) fail("nn::ModuleDict: module '%s' is null (an empty holder?)", name);
  if (auto* slot = modules_.find(name)) {
    *slot = std::move(m);
    reregister();
    return;
  }
  add_child(name, m);
  modules_.insert(name, std::move(m));
}

std::shared_ptr<Module> ModuleDictImpl::pop(const std::string& name) {
  std::shared_ptr<Module> m = (*this)[name];
  Items rest("Module");
  for (const auto& item : modules_)
    if (item.key() != name) rest.push_back_distinct(item.key(), item.value());
  modules_ = std::move(rest);
  reregister();
  return m;
}

void ModuleDictImpl::clear() {
  modules_.clear();
  clear_children();
}

void ModuleDictImpl::reregister() {
  clear_children();
  for (const auto& [name, m] : modules_) add_child(name, m);
}

Tensor ModuleDictImpl::forward(const Tensor&) {
  fail("nn::ModuleDict has no forward (as in LibTorch): look a module up by name and call it");
}

}  // namespace sloth::nn
