"""TorchScript's scalar arithmetic, comparisons and conversions (int, float, bool, number)."""

DECLARATIONS = r"""
aten::add.int(int a, int b) -> int
aten::add.float(float a, float b) -> float
aten::add.int_float(int a, float b) -> float
aten::add.float_int(float a, int b) -> float
aten::add(Scalar a, Scalar b) -> Scalar
aten::sub.int(int a, int b) -> int
aten::sub.float(float a, float b) -> float
aten::sub.int_float(int a, float b) -> float
aten::sub.float_int(float a, int b) -> float
aten::sub(Scalar a, Scalar b) -> Scalar
aten::mul.int(int a, int b) -> int
aten::mul.float(float a, float b) -> float
aten::mul.int_float(int a, float b) -> float
aten::mul.float_int(float a, int b) -> float
aten::mul(Scalar a, Scalar b) -> Scalar
aten::div.int(int a, int b) -> float
aten::div.float(float a, float b) -> float
aten::div(Scalar a, Scalar b) -> float
aten::floordiv.int(int a, int b) -> int
aten::floordiv.float(float a, float b) -> float
aten::floordiv.int_float(int a, float b) -> float
aten::floordiv.float_int(float a, int b) -> float
aten::floordiv(Scalar a, Scalar b) -> Scalar
aten::remainder.int(int a, int b) -> int
aten::remainder.float(float a, float b) -> float
aten::remainder.int_float(int a, float b) -> float
aten::remainder.float_int(float a, int b) -> float
aten::remainder(Scalar a, Scalar b) -> Scalar
aten::divmod.int(int x, int y) -> (int, int)
aten::divmod.float(float x, float y) -> (float, float)
aten::divmod.int_float(int x, float y) -> (float, float)
aten::divmod.float_int(float x, int y) -> (float, float)
aten::pow.int(int a, int b) -> float
aten::pow.float(float a, float b) -> float
aten::pow.int_float(int a, float b) -> float
aten::pow.float_int(float a, int b) -> float
aten::pow.Scalar_Scalar(Scalar a, Scalar b) -> float
aten::pow.int_to_int(int a, int b) -> int
aten::neg.int(int a) -> int
aten::neg.float(float a) -> float
aten::neg.Scalar(Scalar a) -> Scalar
prim::abs.int(int a) -> int
prim::abs.float(float a) -> float
prim::abs.Scalar(Scalar a) -> Scalar
aten::floor.int(int a) -> int
aten::floor.float(float a) -> int
aten::floor.Scalar(Scalar a) -> Scalar
aten::ceil.int(int a) -> int
aten::ceil.float(float a) -> int
aten::ceil.Scalar(Scalar a) -> Scalar
aten::round.int(int a) -> float
aten::round.float(float a) -> float
aten::round.Scalar(Scalar a) -> Scalar
aten::sqrt.int(int a) -> float
aten::sqrt.float(float a) -> float
aten::sqrt.Scalar(Scalar a) -> Scalar
aten::exp.int(int a) -> float
aten::exp.float(float a) -> float
aten::exp.Scalar(Scalar a) -> Scalar
aten::log.int(int a) -> float
aten::log.float(float a) -> float
aten::log.Scalar(Scalar a) -> Scalar
prim::min.int(int a, int b) -> int
prim::min.float(float a, float b) -> float
prim::min.int_float(int a, float b) -> float
prim::min.float_int(float a, int b) -> float
prim::min(Scalar a, Scalar b) -> Scalar
prim::max.int(int a, int b) -> int
prim::max.float(float a, float b) -> float
prim::max.int_float(int a, float b) -> float
prim::max.float_int(float a, int b) -> float
prim::max(Scalar a, Scalar b) -> Scalar
prim::min.int_list(int[] l, int[] r) -> int[]
prim::min.float_list(float[] l, float[] r) -> float[]
prim::min.bool_list(bool[] l, bool[] r) -> bool[]
prim::max.int_list(int[] l, int[] r) -> int[]
prim::max.float_list(float[] l, float[] r) -> float[]
prim::max.bool_list(bool[] l, bool[] r) -> bool[]
prim::min.self_int(int[] self) -> int
prim::min.self_float(float[] self) -> float
prim::min.self_bool(bool[] self) -> bool
prim::max.self_int(int[] self) -> int
prim::max.self_float(float[] self) -> float
prim::max.self_bool(bool[] self) -> bool
aten::__and__.bool(bool a, bool b) -> bool
aten::__and__.int(int a, int b) -> int
aten::__or__.bool(bool a, bool b) -> bool
aten::__or__.int(int a, int b) -> int
aten::__xor__.bool(bool a, bool b) -> bool
aten::__xor__.int(int a, int b) -> int
aten::__lshift__.int(int a, int b) -> int
aten::__rshift__.int(int a, int b) -> int
aten::eq.int(int a, int b) -> bool
aten::eq.float(float a, float b) -> bool
aten::eq.int_float(int a, float b) -> bool
aten::eq.float_int(float a, int b) -> bool
aten::eq(Scalar a, Scalar b) -> bool
aten::eq.str(str a, str b) -> bool
aten::eq.bool(bool a, bool b) -> bool
aten::eq.int_list(int[] a, int[] b) -> bool
aten::eq.float_list(float[] a, float[] b) -> bool
aten::eq.bool_list(bool[] a, bool[] b) -> bool
aten::eq.str_list(str[] a, str[] b) -> bool
aten::ne.int(int a, int b) -> bool
aten::ne.float(float a, float b) -> bool
aten::ne.int_float(int a, float b) -> bool
aten::ne.float_int(float a, int b) -> bool
aten::ne(Scalar a, Scalar b) -> bool
aten::ne.str(str a, str b) -> bool
aten::ne.bool(bool a, bool b) -> bool
aten::ne.int_list(int[] a, int[] b) -> bool
aten::ne.float_list(float[] a, float[] b) -> bool
aten::ne.bool_list(bool[] a, bool[] b) -> bool
aten::ne.str_list(str[] a, str[] b) -> bool
aten::lt.int(int a, int b) -> bool
aten::lt.float(float a, float b) -> bool
aten::lt.int_float(int a, float b) -> bool
aten::lt.float_int(float a, int b) -> bool
aten::lt(Scalar a, Scalar b) -> bool
aten::lt.str(str a, str b) -> bool
aten::gt.int(int a, int b) -> bool
aten::gt.float(float a, float b) -> bool
aten::gt.int_float(int a, float b) -> bool
aten::gt.float_int(float a, int b) -> bool
aten::gt(Scalar a, Scalar b) -> bool
aten::gt.str(str a, str b) -> bool
aten::le.int(int a, int b) -> bool
aten::le.float(float a, float b) -> bool
aten::le.int_float(int a, float b) -> bool
aten::le.float_int(float a, int b) -> bool
aten::le(Scalar a, Scalar b) -> bool
aten::le.str(str a, str b) -> bool
aten::ge.int(int a, int b) -> bool
aten::ge.float(float a, float b) -> bool
aten::ge.int_float(int a, float b) -> bool
aten::ge.float_int(float a, int b) -> bool
aten::ge(Scalar a, Scalar b) -> bool
aten::ge.str(str a, str b) -> bool
aten::Int.bool(bool a) -> int
aten::Int.float(float a) -> int
aten::Int.Scalar(Scalar a) -> int
aten::Int.str(str a) -> int
aten::Float.int(int a) -> float
aten::Float.bool(bool a) -> float
aten::Float.Scalar(Scalar a) -> float
aten::Float.str(str a) -> float
aten::Bool.int(int a) -> bool
aten::Bool.float(float a) -> bool
aten::hash.generic(t value) -> int  @random
"""
