// LibTorch's torch::OrderedDict: what named_parameters(), named_buffers(), named_children()
// and named_modules() return. Items keep insertion order and have LibTorch's key()/value()
// as well as std::pair's first/second, so both `for (auto& p : net->named_parameters())
// p.key()` and `for (auto& [name, t] : net->named_parameters())` work.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/error.h"

namespace sloth {

template <class Key, class Value>
class OrderedDict {
 public:
  class Item : public std::pair<Key, Value> {
   public:
    using std::pair<Key, Value>::pair;
    Item(std::pair<Key, Value> p) : std::pair<Key, Value>(std::move(p)) {}  // NOLINT
    const Key& key() const { return this->first; }
    Value& value() { return this->second; }
    const Value& value() const { return this->second; }
    Value& operator*() { return this->second; }
    const Value& operator*() const { return this->second; }
    Value* operator->() { return &this->second; }
    const Value* operator->() const { return &this->second; }
    const std::pair<Key, Value>& pair() const { return *this; }
  };
  using Iterator = typename std::vector<Item>::iterator;
  using ConstIterator = typename std::vector<Item>::const_iterator;

  OrderedDict() = default;
  explicit OrderedDict(std::string key_description) : key_description_(std::move(key_description)) {}
  OrderedDict(std::initializer_list<Item> items) {
    for (const Item& i : items) insert(i.first, i.second);
  }

  Iterator begin() { return items_.begin(); }
  Iterator end() { return items_.end(); }
  ConstIterator begin() const { return items_.begin(); }
  ConstIterator end() const { return items_.end(); }
  size_t size() const { return items_.size(); }
  bool is_empty() const { return items_.empty(); }
  bool empty() const { return items_.empty(); }
  Item& front() { return at_index(0); }
  Item& back() { return at_index(items_.size() - 1); }
  Item& operator[](size_t index) { return at_index(index); }
  const Item& operator[](size_t index) const { return const_cast<OrderedDict*>(this)->at_index(index); }

  // The value under `key`; a missing key is an error naming it.
  Value& operator[](const Key& key) {
    if (Value* v = find(key)) return *v;
    fail("OrderedDict: %s '%s' is not defined (the %d defined ones are listed by keys())",
         key_description_, absl::StrCat(key), items_.size());
  }
  const Value& operator[](const Key& key) const { return (*const_cast<OrderedDict*>(this))[key]; }
  Value* find(const Key& key) {
    for (Item& i : items_)
      if (i.first == key) return &i.second;
    return nullptr;
  }
  const Value* find(const Key& key) const { return const_cast<OrderedDict*>(this)->find(key); }
  bool contains(const Key& key) const { return find(key) != nullptr; }

  std::vector<Key> keys() const {
    std::vector<Key> out;
    for (const Item& i : items_) out.push_back(i.first);
    return out;
  }
  std::vector<Value> values() const {
    std::vector<Value> out;
    for (const Item& i : items_) out.push_back(i.second);
    return out;
  }
  const std::vector<Item>& items() const { return items_; }
  std::vector<std::pair<Key, Value>> pairs() const { return {items_.begin(), items_.end()}; }

  // Adds a new key (a key already present is an error, as LibTorch's).
  Value& insert(Key key, Value value) {
    if (contains(key))
      fail("OrderedDict: %s '%s' already defined", key_description_, absl::StrCat(key));
    items_.emplace_back(std::move(key), std::move(value));
    return items_.back().second;
  }
  void update(const OrderedDict& other) {
    for (const Item& i : other) {
      if (Value* v = find(i.first)) *v = i.second;
      else insert(i.first, i.second);
    }
  }
  // Appends without looking for the key: for a caller whose keys are distinct by construction
  // (the dotted paths of a module tree), so building a dict of n items stays O(n).
  void push_back_distinct(Key key, Value value) {
    items_.emplace_back(std::move(key), std::move(value));
  }
  void clear() { items_.clear(); }
  void reserve(size_t n) { items_.reserve(n); }
  const std::string& key_description() const { return key_description_; }

 private:
  Item& at_index(size_t index) {
    if (index >= items_.size())
      fail("OrderedDict: index %d is out of range for %d items", index, items_.size());
    return items_[index];
  }
  std::vector<Item> items_;
  std::string key_description_ = "Key";
};

}  // namespace sloth
