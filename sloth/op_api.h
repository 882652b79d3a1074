// Generates the public function and method of every op whose table row names a signature kind
// in its Api column (core/ops.def), so that such an op's API is its row and nothing else.
// Custom rows generate nothing: they are written by hand in sloth/ (overloads, scalar
// wrapping, argument checks). Each kind picks its generator from the column it depends on:
//
//   Api       generator                     emitted (ops.h form; the method drops operand 0)
//   Fn        SLOTH_API_Fn_<Category>       Unary:  name(x)                   x.name()
//                                           Binary: name(a, b)                a.name(b)
//   DimFn     SLOTH_API_DimFn_<arity>       1: name(x, dim)                   x.name(dim)
//                                           2: name(x, dim, index)            x.name(dim, index)
//                                           3: name(base, dim, index, src)    base.name(dim, index, src)
//             (attrs DimAttrs{dim}; operands in the row's order, dim after the first one as in
//             LibTorch)
//   ListDim   SLOTH_API_ListDim             name(tensors, dim = 0)            (no method)
//   ReduceFn  SLOTH_API_ReduceFn            name(x, dims = {}, keepdim = false)   x.name(dims, keepdim)
//   ArgFn     SLOTH_API_ArgFn               name(x, dim, keepdim = false)     x.name(dim, keepdim)
//
// Keying Fn on the category keeps it elementwise-only (an Fn row of a category without a
// generator fails to compile); keying DimFn on the arity gives one kind for the LibTorch
// "(self, dim, tensors...)" shape whatever the number of tensors (a DimFn row of another arity
// fails to compile). tests/op_table_test.cc checks which categories and arities use each kind.
//
// Use: define every generator above for what to emit (empty where a file emits nothing, e.g.
// no ListDim method), then `#include "sloth/op_api_rows.inc"`, which expands them over the
// table and undefines them. sloth/ops.h, sloth/ops.cc, sloth/tensor.h and sloth/tensor.cc
// do so.
#pragma once

#define SLOTH_API_ROW(Id, name, category, arity, alias, rule, grad, api, ...) \
  SLOTH_API_KIND_##api(Id, name, category, arity)

#define SLOTH_API_KIND_Custom(Id, name, category, arity)
#define SLOTH_API_KIND_Fn(Id, name, category, arity) SLOTH_API_Fn_##category(Id, name)
#define SLOTH_API_KIND_DimFn(Id, name, category, arity) SLOTH_API_DimFn_##arity(Id, name)
#define SLOTH_API_KIND_ListDim(Id, name, category, arity) SLOTH_API_ListDim(Id, name)
#define SLOTH_API_KIND_ReduceFn(Id, name, category, arity) SLOTH_API_ReduceFn(Id, name)
#define SLOTH_API_KIND_ArgFn(Id, name, category, arity) SLOTH_API_ArgFn(Id, name)
