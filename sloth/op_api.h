// Generates the public function and method of every op whose table row says Api = Fn
// (core/ops.def): a row picks its generator by pasting its Api and Category columns,
// SLOTH_API_<Api>_<Category>(Id, name). Custom rows generate nothing (they are written by
// hand in sloth/); an Fn row of a category without an Fn generator below fails to compile.
//
// Use: define SLOTH_API_Fn_Unary(Id, name) and SLOTH_API_Fn_Binary(Id, name) for what to
// emit, then `#define OP SLOTH_API_ROW`, `#include "core/ops.def"`, `#undef OP` and undefine
// the two generators. sloth/ops.h, sloth/ops.cc, sloth/tensor.h and sloth/tensor.cc do so
// (the public headers save and restore a user's OP macro with push_macro/pop_macro).
#pragma once

#define SLOTH_API_ROW(Id, name, category, arity, alias, rule, grad, api, ...) \
  SLOTH_API_##api##_##category(Id, name)

#define SLOTH_API_Custom_Leaf(Id, name)
#define SLOTH_API_Custom_Factory(Id, name)
#define SLOTH_API_Custom_Unary(Id, name)
#define SLOTH_API_Custom_Binary(Id, name)
#define SLOTH_API_Custom_Ternary(Id, name)
#define SLOTH_API_Custom_Reduce(Id, name)
#define SLOTH_API_Custom_Matmul(Id, name)
#define SLOTH_API_Custom_View(Id, name)
#define SLOTH_API_Custom_Scatter(Id, name)
#define SLOTH_API_Custom_Index(Id, name)
#define SLOTH_API_Custom_Shape(Id, name)
#define SLOTH_API_Custom_Composite(Id, name)
#define SLOTH_API_Custom_Inplace(Id, name)
