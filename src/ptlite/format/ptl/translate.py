"""Translate PyTorch Mobile bytecode into ptlite's IR, so that legacy files run on ptlite's one interpreter.

The bytecode is a stack machine over numbered registers. It is executed symbolically, once, in program order:
stack slots and registers hold IR values (or values known while translating: constants, and the module objects
that GET_ATTR reads, which become weights and constants). Control flow follows the shapes TorchScript's code
generator emits (`ptl-format.md` section 6.3):

    if/else:  JF else; <then>; JMP end; else: <else>; end:     -> prim::If; values left on the stack and registers
                                                                  set differently in the branches become outputs
    loop:     LOOP exit N; <body>; JMP loop; exit:             -> prim::Loop (trip count, condition, carried)

A jump of any other shape, a register carried from one loop iteration to the next outside LOOP's carried values,
or a construct ptlite's IR cannot express (objects created or mutated at run time) raises a FormatError or
UnsupportedOperatorError naming the instruction and the function: never a silently different program.
Conditions known while translating (`self.training`, `x is None` on a constant) select their branch directly.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from ptlite.errors import FormatError, UnsupportedOperatorError
from ptlite.ir.graph import Block, Graph, Node, Program, Value, ValueSpec
from ptlite.ir.types import type_arguments
from ptlite.ops import MODULE_STATE, Evaluate

from .bytecode import Argument, Function
from .instructions import Instructions, join_path
from .quantized import companion
from .state import StateSlot
from .types import parse_type, type_of, unify
from .unpickler import Device, QTensor, ScriptObject
from .values import CLEARED, LOOP_SLOT, Const, Frame, LoopTrack, Static, const_key, entry_type, is_plain

MAX_INLINE_DEPTH = 32
MAX_CONSTANT_ITEMS = 1 << 20


class Translator(Instructions):
    """Translates the functions of one .ptl file into the methods of a Program."""

    def __init__(self, functions: dict[str, Function], root: ScriptObject, program: Program,
                 operator_version: int, evaluate: Evaluate, lenient: bool = False,
                 state_slots: dict[tuple[int, int], StateSlot] | None = None) -> None:
        self.functions = functions
        self.root = root
        self.program = program
        self.operator_version = operator_version
        self.evaluate = evaluate  # computes what the translation folds (the reference backend's kernels)
        self.lenient = lenient  # translate operators missing from the table as placeholders (to list them all)
        self.missing: dict[str, list[str]] = {}
        self.paths = _object_paths(root)
        self.quantized = companion(program)  # quantized values' scales and zero points (quantized.py)
        self.weight_names: dict[int, str] = {}
        self._keep_alive: list[Any] = []
        self.block: Block = Block()
        self.hoisted: list[Node] = []
        self.const_values: dict[Any, Value] = {}
        self.call_chain: list[str] = []
        # Attributes some method sets, by (id of the object, slot); filled by SET_ATTR (see state.py).
        self.state_slots = {} if state_slots is None else state_slots
        self.state_value: Value | None = None
        # The attribute (object, slot) whose value a Value is (weights, lists of them, views of them) or, for lists
        # and dicts of plain values, a Const holds: written in place, the attribute becomes state.
        self.origins: dict[int, tuple[ScriptObject, int]] = {}
        self.container_origins: dict[int, tuple[ScriptObject, int]] = {}

    # ------------------------------------------------------------------------------------------- methods

    def method(self, fn: Function) -> Graph:
        """The IR graph of one root method (`<root class>.<name>`)."""
        self.hoisted, self.const_values, self.state_value = [], {}, None
        arguments = fn.arguments
        if arguments is None:
            arguments = _arguments_from_code(fn)
        if not arguments:
            raise FormatError(f"{fn.qualname}: a method needs 'self' as its first argument")
        named: dict[str, str] = {}
        inputs = [Value(name=a.name, type=parse_type(a.type, named)) for a in arguments[1:]]
        graph = Graph(fn.name, list(inputs))
        self.block = graph
        result = self.call(fn, [Static(self.root), *inputs])
        graph.outputs = [self.materialize(result, fn, len(fn.instructions) - 1)]
        if self.quantized.qparams:  # a quantized result is returned dequantized (ptlite's values carry no scale)
            tail, graph.outputs = self.quantized.outputs(graph.outputs)
            graph.nodes.extend(tail)
        graph.nodes = self.hoisted + graph.nodes
        graph.input_specs = [_spec(a, parse_type(a.type, named, keep_unions=True)) for a in arguments[1:]]
        returns = fn.returns or []
        out_type = parse_type(returns[0].type, named) if len(returns) == 1 else graph.outputs[0].type
        graph.output_specs = [ValueSpec(name="output", type=out_type)]
        return graph

    def call(self, fn: Function, args: list[Any]) -> Any:
        """Translate a whole function (inlined into the current block) with `args` on its stack; its result."""
        if len(self.call_chain) >= MAX_INLINE_DEPTH or fn.qualname in self.call_chain:
            chain = " -> ".join([*self.call_chain, fn.qualname])
            raise FormatError(f"{fn.qualname}: calls itself or nests calls too deeply ({chain}); ptlite inlines "
                              "method calls and cannot translate recursion")
        self.call_chain.append(fn.qualname)
        try:
            frame = Frame(fn, list(args))
            self.region(frame, 0, len(fn.instructions))
            if not frame.returned:
                raise FormatError(f"{fn.qualname}: the code ends without RET")
            if len(frame.stack) != 1:
                raise FormatError(f"{fn.qualname}: RET with {len(frame.stack)} values on the stack, expected 1")
            return frame.stack[0]
        finally:
            self.call_chain.pop()

    # ------------------------------------------------------------------------------------------- control flow

    def fail(self, frame: Frame, pc: int, message: str, unsupported: bool = False) -> None:
        op = frame.fn.instructions[pc][0] if 0 <= pc < len(frame.fn.instructions) else "?"
        text = f"{frame.fn.qualname}, instruction {pc} ({op}): {message}"
        raise (UnsupportedOperatorError if unsupported else FormatError)(text)

    def region(self, frame: Frame, start: int, end: int, top: bool = True) -> None:
        """Translate instructions [start, end) into the current block."""
        code = frame.fn.instructions
        pc = start
        while pc < end:
            op, x, n = code[pc]
            if op == "JF":
                pc = self.branch(frame, pc, end)
            elif op == "LOOP":
                pc = self.loop(frame, pc, end)
            elif op == "JMP":
                self.fail(frame, pc, "a jump that is not part of an if/else or loop shape")
            elif op == "RET":
                if not top or start != 0:
                    self.fail(frame, pc, "RET inside a branch or loop body")
                frame.returned = True
                return
            else:
                self.instruction(frame, pc, op, x, n)
                pc += 1

    def branch(self, frame: Frame, pc: int, end: int) -> int:
        code = frame.fn.instructions
        else_start = pc + code[pc][1]
        jmp = else_start - 1
        if not (pc < jmp < end) or code[jmp][0] != "JMP":
            self.fail(frame, pc, f"JF to {else_start} does not match the if/else shape (JF else; ...; JMP end)")
        join = jmp + code[jmp][1]
        if not (else_start <= join <= end):
            self.fail(frame, jmp, f"JMP to {join} leaves the enclosing block ({pc} to {end})")
        cond = self.pop(frame, pc)
        known = self.known_bool(cond)
        if known is not None:  # the condition is known now: translate the branch that runs
            if known:
                self.region(frame, pc + 1, jmp, top=False)
            else:
                self.region(frame, else_start, join, top=False)
            return join
        cond_value = self.materialize(cond, frame.fn, pc)
        entry_stack, entry_regs = list(frame.stack), dict(frame.regs)
        then_block = self.sub_block(frame, pc + 1, jmp)
        then_stack, then_regs = frame.stack, frame.regs
        frame.stack, frame.regs = list(entry_stack), dict(entry_regs)
        else_block = self.sub_block(frame, else_start, join)
        else_stack, else_regs = frame.stack, frame.regs
        if len(then_stack) != len(else_stack):
            self.fail(frame, pc, f"the branches leave {len(then_stack)} and {len(else_stack)} values on the stack")
        node = Node("prim::If", [cond_value], [], blocks=[then_block, else_block], source=self.source(frame, pc))
        merged_stack = [self.merge(node, a, b, frame, pc) for a, b in zip(then_stack, else_stack)]
        merged_regs = {}
        for reg in then_regs.keys() | else_regs.keys():
            a, b = then_regs.get(reg, CLEARED), else_regs.get(reg, CLEARED)
            merged_regs[reg] = CLEARED if a is CLEARED or b is CLEARED else self.merge(node, a, b, frame, pc)
        self.block.nodes.append(node)
        self.quantized.control_flow(node)
        frame.stack, frame.regs = merged_stack, merged_regs
        return join

    def sub_block(self, frame: Frame, start: int, end: int) -> Block:
        outer, block = self.block, Block()
        self.block = block
        try:
            self.region(frame, start, end, top=False)
        finally:
            self.block = outer
        return block

    def merge(self, node: Node, a: Any, b: Any, frame: Frame, pc: int) -> Any:
        """The entry after an if/else whose branches produced a and b: the same entry, or a new If output."""
        if a is b:
            return a
        if isinstance(a, Const) and isinstance(b, Const) and not (a.uninitialized or b.uninitialized) \
                and const_key(a.value) == const_key(b.value):
            return a
        then_block, else_block = node.blocks
        then_block.outputs.append(self.materialize(a, frame.fn, pc))
        else_block.outputs.append(self.materialize(b, frame.fn, pc))
        if isinstance(a, Const) and a.uninitialized:
            out_type = entry_type(b)
        elif isinstance(b, Const) and b.uninitialized:
            out_type = entry_type(a)
        else:
            out_type = unify(entry_type(a), entry_type(b))
        out = Value(type=out_type)
        out.node = node
        node.outputs.append(out)
        return out

    def loop(self, frame: Frame, pc: int, end: int) -> int:
        code = frame.fn.instructions
        _, x, n = code[pc]
        jmp, exit_pc = pc + x - 1, pc + x
        if not (pc < jmp < end) or code[jmp][0] != "JMP" or jmp + code[jmp][1] != pc or exit_pc > end:
            self.fail(frame, pc, "LOOP does not match the loop shape (LOOP exit; body; JMP back to LOOP)")
        if n < 2:
            self.fail(frame, pc, f"LOOP with N={n}; N counts the limit, the condition and the carried values")
        window = self.pop_n(frame, n + 1, pc)
        trip, limit, cond, carried = window[0], window[1], window[2], window[3:]
        if not (isinstance(trip, Const) and type(trip.value) is int and trip.value == 0):
            self.fail(frame, pc, "LOOP's trip counter must start at the constant 0")
        if self.known_bool(cond) is False:
            frame.stack.extend(carried)
            return exit_pc
        limit_value = self.materialize(limit, frame.fn, pc)
        cond_value = self.materialize(cond, frame.fn, pc)
        initial = [self.materialize(c, frame.fn, pc) for c in carried]
        index = Value(type="int")
        params = [Value(type=v.type) for v in initial]
        body = Block(inputs=[index, *params])
        outer_stack, outer_regs = frame.stack, dict(frame.regs)
        frame.stack = [*outer_stack, LOOP_SLOT, LOOP_SLOT, index, *params]
        track = LoopTrack(dict(frame.regs))
        frame.loops.append(track)
        outer_block, self.block = self.block, body
        try:
            self.region(frame, pc + 1, jmp, top=False)
        finally:
            self.block = outer_block
            frame.loops.pop()
        stack, depth = frame.stack, len(outer_stack)
        if len(stack) != depth + n + 1 or stack[depth] is not LOOP_SLOT or stack[depth + 1] is not LOOP_SLOT \
                or any(a is not b for a, b in zip(stack, outer_stack)):
            self.fail(frame, jmp, f"the loop body must leave its condition and {n - 2} carried value(s) on top of "
                                  "the loop's counters")
        results = stack[depth + 2:]
        body.outputs = [self.materialize(v, frame.fn, jmp) for v in results]
        carried_across = track.outer_reads & track.writes
        if carried_across:
            self.fail(frame, pc, f"register(s) {sorted(carried_across)} carry values from one iteration to the "
                                 "next outside LOOP's carried values; ptlite cannot translate this loop")
        outputs = []
        for param, init, result in zip(params, initial, body.outputs[1:]):
            param.type = unify(init.type, result.type)
            outputs.append(Value(type=param.type))
        node = Node("prim::Loop", [limit_value, cond_value, *initial], outputs, blocks=[body],
                    source=self.source(frame, pc))
        self.block.nodes.append(node)
        self.quantized.control_flow(node)
        frame.stack = [*outer_stack, *outputs]
        frame.regs = outer_regs
        for reg in track.writes:
            frame.regs[reg] = CLEARED  # values of the body are not visible after the loop
        return exit_pc

    # ------------------------------------------------------------------------------------------- stack, registers

    def pop(self, frame: Frame, pc: int) -> Any:
        if not frame.stack:
            self.fail(frame, pc, "pops an empty stack")
        entry = frame.stack.pop()
        if entry is LOOP_SLOT:
            self.fail(frame, pc, "a loop body pops the loop's own counters")
        return entry

    def pop_n(self, frame: Frame, n: int, pc: int) -> list[Any]:
        if n > len(frame.stack):
            self.fail(frame, pc, f"pops {n} values from a stack of {len(frame.stack)}")
        if n == 0:
            return []
        entries = frame.stack[-n:]
        if any(e is LOOP_SLOT for e in entries):
            self.fail(frame, pc, "a loop body pops the loop's own counters")
        del frame.stack[-n:]
        return entries

    def check_register(self, frame: Frame, reg: int, pc: int) -> None:
        if not 1 <= reg <= frame.fn.register_size:
            self.fail(frame, pc, f"register {reg} outside 1..{frame.fn.register_size}")

    def read(self, frame: Frame, reg: int, pc: int) -> Any:
        self.check_register(frame, reg, pc)
        entry = frame.regs.get(reg, CLEARED)
        if entry is CLEARED:
            self.fail(frame, pc, f"reads register {reg}, which holds no value here")
        for track in frame.loops:
            if reg not in track.writes and track.entry.get(reg) is entry:
                track.outer_reads.add(reg)
        return entry

    def write(self, frame: Frame, reg: int, entry: Any, pc: int) -> None:
        self.check_register(frame, reg, pc)
        frame.regs[reg] = entry
        for track in frame.loops:
            track.writes.add(reg)

    # ------------------------------------------------------------------------------------------- values

    def source(self, frame: Frame, pc: int) -> str:
        return f"{frame.fn.qualname} instruction {pc}"

    def materialize(self, entry: Any, fn: Function, pc: int) -> Value:
        """The IR value of a stack entry: constants become (hoisted, shared) prim::Constant nodes."""
        if isinstance(entry, Value):
            return entry
        if isinstance(entry, Const):
            return self.constant(entry)
        where = f"{fn.qualname}, instruction {pc}"
        if isinstance(entry, Static):
            raise UnsupportedOperatorError(
                f"{where}: the module object {entry.obj.qualname} is used as a run-time value (stored in a "
                "container, returned, passed to an operator or chosen by a condition); ptlite resolves module "
                "objects while loading and cannot pass them around")
        raise FormatError(f"{where}: uses the loop's internal counters as a value")

    def constant(self, const: Const) -> Value:
        if const.uninitialized:
            key: Any = ("uninitialized",)
        elif const.state and isinstance(const.value, (list, dict)):
            key = ("state", id(const.value))
        else:
            key = const_key(const.value)
        value = self.const_values.get(key)
        if value is None:
            if const.uninitialized:
                value = Value(type="Any")
                self.hoisted.append(Node("prim::Uninitialized", [], [value]))
            else:
                stored = str(const.value) if isinstance(const.value, Device) else const.value
                value = Value(type=const.type)
                self.hoisted.append(Node("prim::Constant", [], [value], {"value": stored}))
            self.const_values[key] = value
        return value

    def module_state(self) -> Value:
        """The method's ptlite::module_state value (hoisted, one per method): the loaded Module's state."""
        if self.state_value is None:
            self.state_value = Value(name="module_state", type="Any")
            self.hoisted.append(Node(MODULE_STATE, [], [self.state_value]))
        return self.state_value

    def weight(self, array: np.ndarray, hint: str) -> Value:
        """A hoisted prim::Constant naming the weight that holds `array` (one weight per tensor of the file)."""
        key = ("weight", id(array))
        value = self.const_values.get(key)
        if value is not None:
            return value
        name = self.weight_names.get(id(array))
        if name is None:
            name = _unique(hint, self.program.weights)
            self.program.weights[name] = array
            self.weight_names[id(array)] = name
            self._keep_alive.append(array)
        value = Value(name=name, type="Tensor", dtype=array.dtype.name, shape=tuple(array.shape))
        self.hoisted.append(Node("prim::Constant", [], [value], {"weight": name}))
        self.const_values[key] = value
        return value

    def python_entry(self, value: Any, hint: str, fn: Function, pc: int) -> Any:
        """The entry for a value read from the file (a bytecode constant or a module attribute)."""
        if isinstance(value, ScriptObject):
            return Static(value)
        if isinstance(value, np.ndarray):
            return self.weight(value, hint)
        if isinstance(value, QTensor):
            raise UnsupportedOperatorError(
                f"{fn.qualname}, instruction {pc}: the model reads the quantized tensor {hint} itself; ptlite reads "
                "quantized tensors only as the weights of PyTorch's quantized convolution and linear layers")
        try:
            plain = is_plain(value, [MAX_CONSTANT_ITEMS], set())
        except FormatError as exc:
            raise FormatError(f"{fn.qualname}, instruction {pc}: {hint}: {exc}") from None
        if plain:
            return Const(value, state=True)
        if isinstance(value, (list, tuple)) and all(isinstance(v, np.ndarray) for v in value):
            key = ("tensors", id(value))
            out = self.const_values.get(key)
            if out is None:  # one list per list of the file, built once per call (as LOADC/GET_ATTR share one)
                items = [self.weight(v, f"{hint}.{i}") for i, v in enumerate(value)]
                kind = "prim::ListConstruct" if isinstance(value, list) else "prim::TupleConstruct"
                out = Value(type="List[Tensor]" if isinstance(value, list) else
                            f"Tuple[{', '.join('Tensor' for _ in items)}]")
                self.hoisted.append(Node(kind, items, [out]))
                self.const_values[key] = out
            return out
        raise UnsupportedOperatorError(
            f"{fn.qualname}, instruction {pc}: the value {hint} ({type_of(value)}) mixes tensors or objects "
            "with other values in a container, which ptlite cannot load yet")

    def const(self, value: Any) -> Const:
        return Const(value)

    def known_bool(self, entry: Any) -> bool | None:
        if isinstance(entry, Const) and not entry.uninitialized and isinstance(entry.value, (bool, int)):
            return bool(entry.value)
        return None


def _spec(arg: Any, type_: str) -> ValueSpec:
    """A method input's spec. The file cannot tell 'no default' from 'default None': PyTorch passes None for
    any argument left out; here None is the default of optional arguments only, others are required."""
    spec = ValueSpec(name=arg.name, type=type_)
    optional = type_.startswith("Optional[") or type_ in ("NoneType", "Any") \
        or (type_.startswith("Union[") and "NoneType" in type_arguments(type_)[1])
    if arg.default is not None or optional:
        spec.default, spec.has_default = arg.default, True
    return spec


def _arguments_from_code(fn: Function) -> list[Any]:
    """A bytecode-4 function without a schema: its arguments, from the STOREN that starts it."""
    first = fn.instructions[0] if fn.instructions else ("", 0, 0)
    if first[0] != "STOREN" or first[1] != 1:
        raise FormatError(f"{fn.qualname}: no schema, and the code does not start by storing its arguments")
    return [Argument("self", "Any")] + [Argument(f"input{i}", "Any") for i in range(first[2] - 1)]


def _unique(hint: str, taken: dict) -> str:
    name, i = hint, 1
    while name in taken:
        i += 1
        name = f"{hint}_{i}"
    return name


def _object_paths(root: ScriptObject, limit: int = 1 << 20) -> dict[int, str]:
    """Attribute path of every module object reachable from the root ('' for the root), breadth first."""
    paths = {id(root): ""}
    queue = deque([root])
    while queue:
        obj = queue.popleft()
        base = paths[id(obj)]
        for name, value in zip(getattr(obj, "names", []), getattr(obj, "slots", [])):
            if isinstance(value, ScriptObject) and id(value) not in paths:
                if len(paths) >= limit:
                    raise FormatError("the module holds too many objects")
                paths[id(value)] = join_path(base, name)
                queue.append(value)
    return paths
