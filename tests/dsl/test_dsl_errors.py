"""Expected-error tests for the DSL (Halide style: one test per error).

Each test checks that ``tl.DSLError`` is raised, a key phrase of its message, the exact position
(``e.line``, ``e.col``, ``e.end_col``: 1-based, relative to the ORIGINAL source string, ``end_col``
exclusive) and that ``str(e)`` shows the source line and a caret line under the offending text.
Errors that can only be found with sizes bound (ranges that disagree for these sizes, ambiguous or
non-zero-based inferred ranges) are raised by ``tl.build`` and are tested here too.

Every case here is handled: positions point into the original text, continuation lines included.

Run: ``.venv/bin/pytest tests/dsl/test_dsl_errors.py -q``
"""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl

# ---- helpers -----------------------------------------------------------------------------------------


def op_error(src) -> tl.DSLError:
    """The DSLError that ``tl.op(src)`` raises."""
    with pytest.raises(tl.DSLError) as info:
        tl.op(src)
    return info.value


def build_error(src: str, **sizes) -> tl.DSLError:
    """The DSLError that ``tl.build`` raises for a program ``tl.op`` accepts."""
    op = tl.op(src)  # must parse and check: the error belongs to the sizes
    with pytest.raises(tl.DSLError) as info:
        tl.build(op, **sizes)
    return info.value


def assert_at(e: tl.DSLError, src: str, line: int, col: int, end_col: int | None, text: str | None = None,
              phrase: str | None = None) -> None:
    """`e` points at line `line`, columns [col, end_col) of `src`, which hold `text`, and renders so.

    ``end_col=None`` checks only the start (for errors whose extent is not meaningful).
    """
    assert isinstance(e, tl.DSLError)
    if phrase is not None:
        assert phrase in e.message, e.message
    assert (e.line, e.col) == (line, col), f"got line {e.line}, column {e.col}:\n{e}"
    if end_col is not None:
        assert e.end_col == end_col, f"got end_col {e.end_col}:\n{e}"
    src_line = src.splitlines()[line - 1]
    if text is not None:
        assert end_col is not None
        assert src_line[col - 1:end_col - 1] == text, (src_line, col, end_col)
    # str(e): "line L, column C: message", the source line, a caret line under the columns
    shown = str(e).split("\n")
    assert shown[0] == f"line {line}, column {col}: {e.message}"
    assert shown[1] == "    " + src_line
    carets = shown[2]
    assert carets.startswith("    ")
    carets = carets[4:]
    assert carets.index("^") == col - 1
    assert set(carets[col - 1:]) == {"^"}
    assert carets[:col - 1].strip() == ""
    if end_col is not None:
        assert len(carets) == col - 1 + max(1, end_col - col)


# ---- syntax -----------------------------------------------------------------------------------------


def test_syntax_error_bad_operator():
    src = "def f(A: f32[N]) -> B:\n    B[i] = A[i] $ 2.0"
    e = op_error(src)
    assert "syntax error in the right side" in e.message
    assert_at(e, src, 2, 17, 18, "$")


def test_syntax_error_doubled_operator():
    src = "def f(A: f32[N]) -> B:\n    B[i] = A[i] +* 2.0"
    e = op_error(src)
    assert "syntax error" in e.message
    assert_at(e, src, 2, 18, 19, "*")


def test_syntax_error_unclosed_bracket():
    src = "def f(A: f32[N]) -> B:\n    B[i] = A[i + 1.0"
    e = op_error(src)
    assert "'[' was never closed" in e.message
    assert_at(e, src, 2, 13, 14, "[")


def test_syntax_error_unclosed_paren():
    src = "def f(A: f32[N]) -> B:\n    B[i] = (A[i] + 1.0\n"
    e = op_error(src)
    assert "'(' was never closed" in e.message
    assert_at(e, src, 2, 12, 13, "(")


def test_syntax_error_unmatched_closing_paren():
    src = "def f(A: f32[N]) -> B:\n    B[i] = A[i]) + 1.0"
    e = op_error(src)
    assert "unmatched ')'" in e.message
    assert_at(e, src, 2, 16, 17, ")")


def test_syntax_error_mismatched_bracket_in_def_line():
    src = "def f(A: f32[N) -> C:\n    C[i] = A[i]"
    e = op_error(src)
    assert "syntax error in the def line" in e.message
    assert "does not match" in e.message
    assert_at(e, src, 1, 15, 16, ")")


def test_syntax_error_unclosed_bracket_before_next_statement():
    src = "def f(A: f32[N]) -> C:\n    T[i] = A[i\n    C[i] = T[i]"
    e = op_error(src)
    assert "never closed" in e.message
    assert_at(e, src, 2, 13, 14, "[")


def test_syntax_error_unmatched_bracket_on_left_side():
    src = "def f(A: f32[N]) -> C:\n    C[i]] = A[i]"
    e = op_error(src)
    assert "unmatched ']'" in e.message
    assert_at(e, src, 2, 9, 10, "]")


def test_missing_right_side():
    src = "def f(A: f32[N]) -> B:\n    B[i] = "
    e = op_error(src)
    assert "missing right side" in e.message
    assert_at(e, src, 2, 10, 11, "=")


def test_missing_right_side_of_reduction():
    src = "def f(A: f32[N]) -> B:\n    B += "
    e = op_error(src)
    assert "missing right side" in e.message
    assert_at(e, src, 2, 7, 9, "+=")


def test_missing_left_side():
    src = "def f(A: f32[N]) -> C:\n    = A[i]"
    e = op_error(src)
    assert "expected a statement" in e.message
    assert_at(e, src, 2, 5, 11, "= A[i]")


def test_missing_operand_after_operator():
    src = "def f(A: f32[N]) -> B:\n    B[i] = A[i] +"
    e = op_error(src)
    assert "syntax error" in e.message
    # the dangling `+` (column 17) or just after it (column 18)
    assert e.line == 2 and e.col in (17, 18), str(e)


def test_comparison_is_not_an_assignment():
    src = "def f(A: f32[N]) -> C:\n    C[i] == A[i]"
    e = op_error(src)
    assert "expected a statement" in e.message
    assert_at(e, src, 2, 5, 17, "C[i] == A[i]")


# ---- program structure ---------------------------------------------------------------------------------


def test_empty_program():
    e = op_error("")
    assert "empty program" in e.message
    assert e.line is None and e.col is None
    assert str(e) == e.message


def test_only_comments_and_blank_lines_is_empty():
    e = op_error("\n   # nothing here\n\n")
    assert "empty program" in e.message
    assert e.line is None


def test_program_without_statements():
    src = "def f(A: f32[N]) -> C:\n"
    e = op_error(src)
    assert "`f` has no statements" in e.message
    assert_at(e, src, 1, 1, 23, "def f(A: f32[N]) -> C:")


def test_program_without_statements_indented():
    src = """
        def f(A: f32[N]) -> C:  # nothing follows
        """
    e = op_error(src)
    assert "has no statements" in e.message
    assert_at(e, src, 2, 9, 31, "def f(A: f32[N]) -> C:")


def test_program_not_starting_with_def():
    src = "C[i] = A[i]"
    e = op_error(src)
    assert "starts with `def" in e.message
    assert_at(e, src, 1, 1, 12, "C[i] = A[i]")


def test_program_not_starting_with_def_indented():
    src = """
        # a comment first

        C[i] = A[i]
        """
    e = op_error(src)
    assert "starts with `def" in e.message
    assert_at(e, src, 4, 9, 20, "C[i] = A[i]")


def test_statement_not_indented_under_def():
    src = "def f(A: f32[N]) -> C:\nC[i] = A[i]"
    e = op_error(src)
    assert "must be indented" in e.message
    assert_at(e, src, 2, 1, 12, "C[i] = A[i]")


def test_non_str_program():
    with pytest.raises(tl.DSLError) as info:
        tl.op(3)
    e = info.value
    assert "a str" in e.message and "int" in e.message
    assert e.line is None


def test_non_str_program_bytes():
    with pytest.raises(tl.DSLError) as info:
        tl.op(b"def f(A: f32[N]) -> B:\n    B[i] = A[i]")
    assert "bytes" in info.value.message


def test_missing_output_arrow():
    src = "def f(A: f32[N]):\n    C[i] = A[i]"
    e = op_error(src)
    assert "missing output" in e.message
    assert_at(e, src, 1, 1, 18)


def test_program_without_inputs():
    src = "def f() -> C:\n    C[i] = 1.0"
    e = op_error(src)
    assert "has no inputs" in e.message
    assert e.line == 1 and e.col == 1


# ---- declarations ----------------------------------------------------------------------------------------


def test_unknown_dtype():
    src = "def f(A: f16[N]) -> C:\n    C[i] = A[i]"
    e = op_error(src)
    assert "unknown dtype `f16`" in e.message
    assert "f32" in e.message and "f64" in e.message and "i32" in e.message
    assert_at(e, src, 1, 10, 13, "f16")


def test_unknown_dtype_in_multiline_header():
    src = """
    def f(A: f32[N],
          B: f16[N]) -> C:
        C[i] = A[i] + B[i]
    """
    e = op_error(src)
    assert "unknown dtype `f16`" in e.message
    assert_at(e, src, 3, 14, 17, "f16")


def test_unknown_dtype_in_multiline_header_with_comment_line():
    src = """
    def f(A: f32[N],   # the data
          # the second input:
          B: f16[N]) -> C:
        C[i] = A[i] + B[i]
    """
    e = op_error(src)
    assert "unknown dtype `f16`" in e.message
    assert_at(e, src, 4, 14, 17, "f16")


def test_input_declared_twice():
    src = "def f(A: f32[N], A: f32[N]) -> C:\n    C[i] = A[i]"
    e = op_error(src)
    assert "`A` is declared twice" in e.message
    assert e.line == 1 and e.col == 18


def test_reserved_word_as_input_name():
    src = "def f(exp: f32[N]) -> C:\n    C[i] = exp[i]"
    e = op_error(src)
    assert "reserved word" in e.message
    assert e.line == 1 and e.col == 7


def test_output_listed_twice():
    src = "def f(A: f32[N]) -> (C, C):\n    C[i] = A[i]"
    e = op_error(src)
    assert "listed twice" in e.message
    assert_at(e, src, 1, 25, 26, "C")


# ---- names -----------------------------------------------------------------------------------------------


def test_unknown_tensor():
    src = "def f(A: f32[N]) -> B:\n    B[i] = Q[i]"
    e = op_error(src)
    assert "unknown tensor `Q`" in e.message
    assert_at(e, src, 2, 12, 13, "Q")


def test_unknown_tensor_indented_line_4():
    src = """
    def f(A: f32[N], B: f32[N]) -> C:
        T[i] = A[i] * 2.0
        C[i] = T[i] + Q[i]
    """
    e = op_error(src)
    assert "unknown tensor `Q`" in e.message
    assert "A, B" in e.message  # lists the inputs
    assert_at(e, src, 4, 23, 24, "Q")


def test_unknown_function():
    src = "def f(A: f32[N]) -> C:\n    C[i] = foo(A[i])"
    e = op_error(src)
    assert "unknown function `foo`" in e.message
    assert "exp" in e.message  # lists the functions
    assert_at(e, src, 2, 12, 15, "foo")


def test_function_used_without_call():
    src = "def f(A: f32[N]) -> C:\n    C[i] = A[i] + exp"
    e = op_error(src)
    assert "is a function" in e.message
    assert_at(e, src, 2, 19, 22, "exp")


def test_wrong_argument_count():
    src = "def f(A: f32[N]) -> C:\n    C[i] = max(A[i])"
    e = op_error(src)
    assert "`max` takes 2 arguments, 1 given" in e.message
    assert_at(e, src, 2, 12, 21, "max(A[i])")


def test_wrong_argument_count_too_many():
    src = "def f(A: f32[N]) -> C:\n    C[i] = exp(A[i], A[i])"
    e = op_error(src)
    assert "`exp` takes 1 argument, 2 given" in e.message
    assert_at(e, src, 2, 12, 27, "exp(A[i], A[i])")


def test_keyword_argument():
    src = "def f(A: f32[N]) -> C:\n    C[i] = exp(x=A[i])"
    e = op_error(src)
    assert "no keyword arguments" in e.message
    assert_at(e, src, 2, 12, 23, "exp(x=A[i])")


def test_string_constant():
    src = "def f(A: f32[N]) -> C:\n    C[i] = A[i] + 'x'"
    e = op_error(src)
    assert "unsupported constant" in e.message
    assert_at(e, src, 2, 19, 22, "'x'")


# ---- indices -----------------------------------------------------------------------------------------------


def test_too_many_indices():
    src = "def f(A: f32[N]) -> B:\n    B[i] = A[i, j]"
    e = op_error(src)
    assert "wrong number of indices for `A`: 2 given, 1 expected" in e.message
    assert "A: f32[N]" in e.message
    assert_at(e, src, 2, 12, 19, "A[i, j]")


def test_too_few_indices():
    src = "def f(A: f32[N, M]) -> B:\n    B[i] = A[i]"
    e = op_error(src)
    assert "wrong number of indices for `A`: 1 given, 2 expected" in e.message
    assert_at(e, src, 2, 12, 16, "A[i]")


def test_wrong_number_of_indices_of_a_stage():
    src = "def f(A: f32[N]) -> C:\n    T[i] = A[i]\n    C[i] = T[i, 0]"
    e = op_error(src)
    assert "wrong number of indices for `T`: 2 given, 1 expected" in e.message
    assert_at(e, src, 3, 12, 19, "T[i, 0]")


def test_non_affine_index():
    src = "def f(A: f32[N]) -> B:\n    B[i] += A[i*j]"
    e = op_error(src)
    assert "non-affine index" in e.message
    assert_at(e, src, 2, 15, 18, "i*j")


def test_float_in_index():
    src = "def f(A: f32[N]) -> C:\n    C[i] = A[i + 1.5]"
    e = op_error(src)
    assert "an index is affine" in e.message
    assert_at(e, src, 2, 18, 21, "1.5")


def test_tensor_used_as_index():
    src = "def f(A: f32[N], I: i32[N]) -> C:\n    C[i] = A[I]"
    e = op_error(src)
    assert "a tensor (`I`) cannot be used as an index" in e.message
    assert_at(e, src, 2, 14, 15, "I")


def test_left_side_index_expression():
    src = "def f(A: f32[N]) -> C:\n    C[i+1] = A[i]"
    e = op_error(src)
    assert "left-side index is a plain index variable" in e.message
    assert_at(e, src, 2, 7, 10, "i+1")


def test_left_side_index_is_a_size():
    src = "def f(A: f32[N]) -> C:\n    C[N] = A[0]"
    e = op_error(src)
    assert "left-side index is a plain index variable" in e.message
    assert_at(e, src, 2, 7, 8, "N")


def test_repeated_left_side_index():
    src = "def f(A: f32[N, N]) -> C:\n    C[i, i] = A[i, i]"
    e = op_error(src)
    assert "index `i` appears twice on the left side" in e.message
    assert_at(e, src, 2, 10, 11, "i")


# ---- ranges ----------------------------------------------------------------------------------------------


def test_index_ranges_disagree():
    src = "def f(A: f32[N], B: f32[M]) -> C:\n    C[i] = A[i] + B[i]"
    e = op_error(src)
    assert "index `i` ranges over 0:M in B" in e.message
    assert "0:N in A" in e.message
    assert "where i in" in e.message
    assert_at(e, src, 2, 21, 22, "i")


def test_index_ranges_agree_with_same_size_name():
    op = tl.op("def f(A: f32[N], B: f32[N]) -> C:\n    C[i] = A[i] + B[i]")
    assert op.size_names == ("N",)


def test_index_ranges_disagree_at_build_through_intermediate_stage():
    src = "def f(A: f32[N], B: f32[M]) -> C:\n    T[i] = A[i] * 2.0\n    C[i] = T[i] + B[i]"
    e = build_error(src, N=4, M=3)
    assert "index `i` ranges over 0:3 in B" in e.message
    assert "0:4 in T" in e.message
    assert "for these sizes" in e.message
    assert_at(e, src, 3, 21, 22, "i")


def test_index_ranges_through_intermediate_stage_build_with_equal_sizes():
    op = tl.op("def f(A: f32[N], B: f32[M]) -> C:\n    T[i] = A[i] * 2.0\n    C[i] = T[i] + B[i]")
    k = tl.build(op, N=3, M=3)
    assert k.output_shapes == {"C": (3,)}


def test_index_ranges_disagree_at_build_indented():
    src = """
    def f(A: f32[N], B: f32[M]) -> C:
        T[i] = A[i] * 2.0
        C[i] = T[i] + B[i]
    """
    e = build_error(src, N=2, M=5)
    assert "ranges over 0:5 in B" in e.message
    assert_at(e, src, 4, 25, 26, "i")


def test_range_of_left_only_index_cannot_be_inferred():
    src = "def f(A: f32[N]) -> B:\n    B[i, j] = A[i]"
    e = op_error(src)
    assert "cannot infer the range of `j`" in e.message
    assert "where j in" in e.message
    assert_at(e, src, 2, 10, 11, "j")


def test_range_of_left_only_index_with_where_is_fine():
    op = tl.op("def f(A: f32[N]) -> B:\n    B[i, j] = A[i] where j in 0:3")
    assert tl.build(op, N=2).output_shapes == {"B": (2, 3)}


def test_range_cannot_be_inferred_two_unknowns_in_one_dimension():
    src = "def f(A: f32[N]) -> C:\n    C[i] += A[i + j]"
    e = op_error(src)
    assert "cannot infer the range of `i`" in e.message
    assert "never the only unknown" in e.message
    assert "where i in" in e.message
    assert_at(e, src, 2, 7, 8, "i")


def test_range_cannot_be_inferred_reduction_only():
    src = "def f(A: f32[N]) -> B:\n    B += A[i + j]"
    e = op_error(src)
    assert "cannot infer the range of `i`" in e.message
    assert_at(e, src, 2, 12, 13, "i")


def test_ambiguous_inferred_ranges_at_build():
    src = "def f(A: f32[N], K: f32[M]) -> B:\n    B[i, j] = A[i] + A[i + j] * K[j]"
    e = build_error(src, N=5, M=2)
    assert "ambiguous" in e.message
    assert "read at 0..5" in e.message and "extent 5" in e.message
    assert "where" in e.message
    assert_at(e, src, 2, 24, 29, "i + j")


def test_ambiguous_inferred_ranges_fixed_by_where():
    op = tl.op("def f(A: f32[N], K: f32[M]) -> B:\n    B[i, j] = A[i] + A[i + j] * K[j] where i in 0:N - M + 1")
    assert tl.build(op, N=5, M=2).output_shapes == {"B": (4, 2)}


def test_inferred_left_side_range_starting_above_zero():
    src = "def f(A: f32[N]) -> B:\n    B[i] = A[i - 1]"
    e = build_error(src, N=4)
    assert "starts at 1" in e.message
    assert "where i in 0:" in e.message
    assert_at(e, src, 2, 14, 19, "i - 1")


def test_inferred_left_side_range_starting_above_zero_indented():
    src = """
    def f(A: f32[N]) -> B:
        B[i] = A[i - 1]
    """
    e = build_error(src, N=4)
    assert "starts at 1" in e.message
    assert_at(e, src, 3, 18, 23, "i - 1")


def test_left_side_where_range_must_start_at_zero():
    src = "def f(A: f32[N]) -> C:\n    C[i] = A[i] where i in 1:N"
    e = op_error(src)
    assert "starts at 0 (not 1)" in e.message
    assert_at(e, src, 2, 28, 29, "1")


# ---- reductions ---------------------------------------------------------------------------------------------


def test_reduction_op_without_reduction_index():
    src = "def f(A: f32[N]) -> C:\n    C[i] += A[i]"
    e = op_error(src)
    assert "`+=` reduces over indices that appear only on the right side" in e.message
    assert_at(e, src, 2, 10, 12, "+=")


def test_max_reduction_without_reduction_index():
    src = "def f(A: f32[N, M]) -> C:\n    C[i, j] max= A[i, j]"
    e = op_error(src)
    assert "`max=` reduces" in e.message
    assert_at(e, src, 2, 13, 17, "max=")


def test_assignment_with_reduction_index():
    src = "def f(A: f32[N, M]) -> C:\n    C[i] = A[i, j]"
    e = op_error(src)
    assert "`j` appears only on the right side, so it is a reduction index" in e.message
    assert "+=" in e.message
    assert_at(e, src, 2, 17, 18, "j")


# ---- dtypes --------------------------------------------------------------------------------------------------


def test_dtype_mismatch_f32_f64():
    src = "def f(A: f32[N], B: f64[N]) -> C:\n    C[i] = A[i] + B[i]"
    e = op_error(src)
    assert "dtype mismatch in `+`: f32 and f64" in e.message
    assert "f64(...)" in e.message
    assert_at(e, src, 2, 12, 23, "A[i] + B[i]")


def test_dtype_mismatch_through_stage_indented():
    src = """
    def f(A: f32[N], B: f64[N]) -> C:
        T[i] = A[i]
        C[i] = T[i] + B[i]
    """
    e = op_error(src)
    assert "dtype mismatch in `+`: f32 and f64" in e.message
    assert_at(e, src, 4, 16, 27, "T[i] + B[i]")


def test_dtype_mismatch_in_function_call():
    src = "def f(A: f32[N], B: f64[N]) -> C:\n    C[i] = max(A[i], B[i])"
    e = op_error(src)
    assert "dtype mismatch in `max`" in e.message
    assert_at(e, src, 2, 12, 27, "max(A[i], B[i])")


def test_float_literal_with_i32_tensor():
    src = "def f(A: i32[N]) -> C:\n    C[i] = A[i] + 1.5"
    e = op_error(src)
    assert "dtype mismatch in `+`" in e.message
    assert "float" in e.message and "i32" in e.message
    assert_at(e, src, 2, 12, 22, "A[i] + 1.5")


def test_int_literal_with_i32_tensor_is_fine():
    assert tl.op("def f(A: i32[N]) -> C:\n    C[i] = A[i] * 2").stages[0].dtype == "i32"


def test_exp_of_i32_tensor():
    src = "def f(A: i32[N]) -> C:\n    C[i] = exp(A[i])"
    e = op_error(src)
    assert "`exp` needs a float argument, got i32" in e.message
    assert "f32(...)" in e.message
    assert_at(e, src, 2, 12, 21, "exp(A[i])")


def test_select_condition_must_be_a_comparison():
    src = "def f(A: f32[N]) -> C:\n    C[i] = select(A[i], 1.0, 0.0)"
    e = op_error(src)
    assert "needs a comparison" in e.message
    assert_at(e, src, 2, 19, 23, "A[i]")


# ---- stages ----------------------------------------------------------------------------------------------------


def test_cycle_between_two_stages():
    src = "def f(A: f32[N]) -> C:\n    B[i] = C[i] + A[i]\n    C[i] = B[i] * 2.0"
    e = op_error(src)
    assert "cycle between stages" in e.message
    assert "B -> C -> B" in e.message
    assert_at(e, src, 3, 12, 13, "B")


def test_cycle_between_two_stages_indented():
    src = """
    def f(A: f32[N]) -> C:
        B[i] = C[i] + A[i]
        C[i] = B[i] * 2.0
    """
    e = op_error(src)
    assert "cycle between stages" in e.message
    assert_at(e, src, 4, 16, 17, "B")


def test_stage_reads_itself():
    src = "def f(A: f32[N]) -> C:\n    C[i] = C[i] + A[i]"
    e = op_error(src)
    assert "stage `C` reads the element it writes, `C[i]`" in e.message  # a scan reads an earlier one (test_scan.py)
    assert_at(e, src, 2, 12, 16, "C[i]")


def test_stage_written_twice():
    src = "def f(A: f32[N]) -> C:\n    C[i] = A[i]\n    C[i] = A[i] * 2.0"
    e = op_error(src)
    assert "stage `C` is written twice (first at line 2)" in e.message
    assert_at(e, src, 3, 5, 6, "C")


def test_stage_written_twice_indented():
    src = """
        def f(A: f32[N]) -> C:
            # first
            C[i] = A[i]

            C[i] = A[i] * 2.0
        """
    e = op_error(src)
    assert "stage `C` is written twice (first at line 4)" in e.message
    assert_at(e, src, 6, 13, 14, "C")


def test_writing_an_input():
    src = "def f(A: f32[N]) -> C:\n    A[i] = 1.0\n    C[i] = A[i]"
    e = op_error(src)
    assert "`A` is an input and cannot be written" in e.message
    assert_at(e, src, 2, 5, 6, "A")


def test_writing_a_size():
    src = "def f(A: f32[N]) -> C:\n    N = 1\n    C[i] = A[i]"
    e = op_error(src)
    assert "`N` is a size and cannot be written" in e.message
    assert_at(e, src, 2, 5, 6, "N")


def test_unused_input():
    src = "def f(A: f32[N], B: f32[N]) -> C:\n    C[i] = A[i]"
    e = op_error(src)
    assert "input `B` is never used" in e.message
    assert_at(e, src, 1, 18, 27, "B: f32[N]")


def test_unused_int_size_input():
    src = "def f(A: f32[N], k: int) -> C:\n    C[i] = A[i]"
    e = op_error(src)
    assert "size input `k` is never used" in e.message
    assert_at(e, src, 1, 18, 24, "k: int")


def test_unused_int_size_input_on_second_header_line():
    src = """
    def f(A: f32[N],
          k: int) -> C:
        C[i] = A[i]
    """
    e = op_error(src)
    assert "size input `k` is never used" in e.message
    assert_at(e, src, 3, 11, 17, "k: int")


def test_unused_int_size_input_mentioned_in_comment():
    src = "# k: int is a stride\ndef f(A: f32[N], k: int) -> C:\n    C[i] = A[i]"
    e = op_error(src)
    assert "size input `k` is never used" in e.message
    assert_at(e, src, 2, 18, 24, "k: int")


def test_int_size_used_only_in_where_counts_as_used():
    op = tl.op("def f(A: f32[N], p: int) -> C:\n    C[i] = A[i] where i in 0:N + p")
    assert op.size_names == ("N", "p")


def test_unused_intermediate_stage():
    src = "def f(A: f32[N]) -> C:\n    T[i] = A[i]\n    C[i] = A[i]"
    e = op_error(src)
    assert "stage `T` is computed but never used" in e.message
    assert "-> (C, T)" in e.message
    assert_at(e, src, 2, 5, 6, "T")


def test_output_never_computed():
    src = "def f(A: f32[N]) -> (C, D):\n    C[i] = A[i]"
    e = op_error(src)
    assert "output `D` is not computed by any statement" in e.message
    assert_at(e, src, 1, 25, 26, "D")


def test_output_never_computed_on_second_header_line():
    src = """
    def f(A: f32[N]) -> (C,
                         D):
        C[i] = A[i]
    """
    e = op_error(src)
    assert "output `D` is not computed" in e.message
    assert_at(e, src, 3, 26, 27, "D")


# ---- where -------------------------------------------------------------------------------------------------------


def test_unknown_size_in_where_bound():
    src = "def f(A: f32[N]) -> C:\n    C[i] = A[i] where i in 0:Q"
    e = op_error(src)
    assert "unknown size `Q`" in e.message
    assert_at(e, src, 2, 30, 31, "Q")


def test_unknown_size_in_where_bound_indented():
    src = """
    def f(A: f32[N]) -> C:
        T[i] = A[i]
        C[i] = T[i] where i in 0:Q
    """
    e = op_error(src)
    assert "unknown size `Q`" in e.message
    assert_at(e, src, 4, 34, 35, "Q")


def test_where_for_unused_variable():
    src = "def f(A: f32[N]) -> C:\n    C[i] = A[i] where k in 0:N"
    e = op_error(src)
    assert "where gives a range for `k`, which the statement does not use" in e.message
    assert_at(e, src, 2, 23, 24, "k")


def test_where_gives_a_range_twice():
    src = "def f(A: f32[N]) -> C:\n    C[i] = A[i] where i in 0:N, i in 0:N"
    e = op_error(src)
    assert "twice" in e.message
    assert_at(e, src, 2, 33, 34, "i")


def test_where_without_colon_range():
    src = "def f(A: f32[N]) -> C:\n    C[i] = A[i] where i in 0"
    e = op_error(src)
    assert "a range is `LO:HI`" in e.message
    assert_at(e, src, 2, 23, 29, "i in 0")


# ---- positions in multi-line and indented sources ------------------------------------------------------------------


def test_syntax_error_after_comments_and_blank_lines_indented():
    src = """
    def f(A: f32[N]) -> C:
        # comment
        T[i] = A[i] * 2.0

        C[i] = T[i] + + * 2
    """
    e = op_error(src)
    assert "syntax error" in e.message
    assert_at(e, src, 6, 25, 26, "*")


def test_trailing_comment_does_not_shift_position():
    src = "def f(A: f32[N]) -> C:  # out\n    C[i] = A[i] + Q[i]  # comment"
    e = op_error(src)
    assert "unknown tensor `Q`" in e.message
    assert_at(e, src, 2, 19, 20, "Q")


def test_crlf_line_endings():
    src = "def f(A: f32[N]) -> C:\r\n    C[i] = Q[i]\r\n"
    e = op_error(src)
    assert "unknown tensor `Q`" in e.message
    assert_at(e, src, 2, 12, 13, "Q")


def test_error_on_bracket_continuation_line():
    src = """
    def f(A: f32[N]) -> C:
        C[i] = A[i] + (
            Q[i])
    """
    e = op_error(src)
    assert "unknown tensor `Q`" in e.message
    assert_at(e, src, 4, 13, 14, "Q")


def test_error_on_backslash_continuation_line():
    src = "def f(A: f32[N]) -> C:\n    C[i] = A[i] + \\\n        Q[i]"
    e = op_error(src)
    assert "unknown tensor `Q`" in e.message
    assert_at(e, src, 3, 9, 10, "Q")


def test_continued_statement_still_parses():
    op = tl.op("def f(A: f32[N]) -> C:\n    C[i] = (A[i] +\n            A[i])")
    assert op.outputs == ("C",)


def test_caret_aligned_with_tab_indentation():
    src = "def f(A: f32[N]) -> C:\n\tC[i] = Q[i]"
    e = op_error(src)
    assert (e.line, e.col) == (2, 9)
    shown = str(e).split("\n")
    assert shown[2].expandtabs().index("^") == shown[1].expandtabs().index("Q")


def test_unknown_bare_name_on_the_right_side():
    src = "def f(A: f32[N]) -> C:\n    C[i] = A[i] + Q"
    e = op_error(src)
    assert_at(e, src, 2, 19, 20, "Q", phrase="unknown name `Q`")


def test_an_expression_too_deep_to_parse_is_a_dsl_error_not_a_recursion_error():
    e = op_error("def f(A: f32[N]) -> B:\n    B[i] = A[i]" + " + A[i]" * 3000 + "\n")
    assert "an expression is nested too deeply to parse" in str(e) and e.line is None


def test_a_right_side_deeper_than_the_compiler_takes_is_refused_where_it_starts():
    from tensorlang.parse import MAX_EXPR_DEPTH
    terms = MAX_EXPR_DEPTH - 1  # a chain of n reads is n + 1 levels deep: the reads' own tensor and index add one
    ok = "def f(A: f32[N]) -> B:\n    B[i] = " + " + ".join(["A[i]"] * terms)
    k = tl.build(tl.op(ok), N=3)  # the deepest right side allowed builds and computes
    assert k(np.ones(3, np.float32)).tolist() == [terms] * 3
    src = ok + " + A[i]"
    e = op_error(src)
    assert e.line == 2 and e.col == 12
    assert f"nested {MAX_EXPR_DEPTH + 1} levels deep, more than {MAX_EXPR_DEPTH}" in e.message
