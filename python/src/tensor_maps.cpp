//===- tensor_maps.cpp - host-encoded TMA tensor maps ---------------------===//

#include "tensor_maps.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

using namespace sage::python;

namespace {
/// Wraps `v` to a signed `width`-bit value.
std::int64_t wrap(std::uint64_t v, int width) {
  if (width == 64)
    return static_cast<std::int64_t>(v);
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
}
} // namespace

HostExpression::HostExpression(const std::string &text) : source(text) {
  std::size_t at = 0;
  parse(text, at);
  if (at != text.size())
    throw std::invalid_argument("host expression '" + text +
                                "': unexpected text at " + std::to_string(at));
}

void HostExpression::parse(const std::string &text, std::size_t &at) {
  auto fail = [&](const std::string &why) {
    throw std::invalid_argument("host expression '" + text + "': " + why +
                                " at " + std::to_string(at));
  };
  auto number = [&](bool allowSign) {
    std::size_t start = at;
    if (allowSign && at < text.size() && text[at] == '-')
      ++at;
    while (at < text.size() &&
           std::isdigit(static_cast<unsigned char>(text[at])))
      ++at;
    if (at == start || (text[start] == '-' && at == start + 1))
      fail("expected a number");
    try {
      return std::stoll(text.substr(start, at - start));
    } catch (const std::out_of_range &) {
      fail("number out of range");
    }
    return 0LL;
  };
  if (at + 1 < text.size() && text[at] == 'a' &&
      std::isdigit(static_cast<unsigned char>(text[at + 1]))) {
    ++at;
    program.push_back({Op::Arg, 64, number(false)});
    return;
  }
  if (at < text.size() &&
      (text[at] == '-' || std::isdigit(static_cast<unsigned char>(text[at])))) {
    program.push_back({Op::Const, 64, number(true)});
    return;
  }
  std::size_t start = at;
  while (at < text.size() && std::isalpha(static_cast<unsigned char>(text[at])))
    ++at;
  std::string name = text.substr(start, at - start);
  static const std::pair<const char *, Op> ops[] = {
      {"add", Op::Add}, {"sub", Op::Sub},   {"mul", Op::Mul},
      {"div", Op::Div}, {"rem", Op::Rem},   {"min", Op::Min},
      {"max", Op::Max}, {"zext", Op::Zext}, {"trunc", Op::Trunc}};
  auto it = std::find_if(std::begin(ops), std::end(ops),
                         [&](const auto &op) { return name == op.first; });
  if (it == std::end(ops))
    fail("unknown operator '" + name + "'");
  long long width = number(false);
  if (width != 32 && width != 64)
    fail("width must be 32 or 64");
  bool unary = it->second == Op::Zext || it->second == Op::Trunc;
  if (at >= text.size() || text[at] != '(')
    fail("expected '('");
  ++at;
  parse(text, at);
  if (!unary) {
    if (at >= text.size() || text[at] != ',')
      fail("expected ','");
    ++at;
    parse(text, at);
  }
  if (at >= text.size() || text[at] != ')')
    fail("expected ')'");
  ++at;
  program.push_back({it->second, static_cast<int>(width), 0});
}

std::int64_t HostExpression::evaluate(const std::vector<std::int64_t> &args,
                                      const std::vector<bool> &integer) const {
  std::vector<std::int64_t> stack;
  auto fail = [&](const std::string &why) {
    throw std::invalid_argument("host expression '" + source + "': " + why);
  };
  for (const Node &node : program) {
    if (node.op == Op::Arg) {
      if (node.value < 0 || std::size_t(node.value) >= args.size() ||
          !integer[node.value])
        fail("argument " + std::to_string(node.value) +
             " is not an integer or pointer argument of the kernel");
      stack.push_back(args[node.value]);
      continue;
    }
    if (node.op == Op::Const) {
      stack.push_back(node.value);
      continue;
    }
    std::uint64_t x = static_cast<std::uint64_t>(stack.back());
    stack.pop_back();
    if (node.op == Op::Zext) {
      stack.push_back(node.width == 64 ? static_cast<std::int64_t>(x)
                                       : static_cast<std::int64_t>(
                                             static_cast<std::uint32_t>(x)));
      continue;
    }
    if (node.op == Op::Trunc) {
      stack.push_back(wrap(x, node.width));
      continue;
    }
    std::uint64_t lhs = static_cast<std::uint64_t>(stack.back());
    stack.pop_back();
    std::int64_t a = wrap(lhs, node.width), b = wrap(x, node.width);
    std::uint64_t result = 0;
    switch (node.op) {
    case Op::Add:
      result = lhs + x;
      break;
    case Op::Sub:
      result = lhs - x;
      break;
    case Op::Mul:
      result = lhs * x;
      break;
    case Op::Div:
    case Op::Rem: {
      if (b == 0)
        fail("division by zero");
      // INT_MIN / -1 wraps (LLVM's sdiv is undefined there; the device
      // would not produce a usable map either).
      if (b == -1) {
        result = node.op == Op::Div ? 0 - static_cast<std::uint64_t>(a) : 0;
        break;
      }
      result = static_cast<std::uint64_t>(node.op == Op::Div ? a / b : a % b);
      break;
    }
    case Op::Min:
      result = static_cast<std::uint64_t>(std::min(a, b));
      break;
    case Op::Max:
      result = static_cast<std::uint64_t>(std::max(a, b));
      break;
    default:
      fail("bad program");
    }
    stack.push_back(wrap(result, node.width));
  }
  return stack.back();
}

TensorMapFields HostTensorMap::fields(const std::vector<std::int64_t> &args,
                                      const std::vector<bool> &integer) const {
  TensorMapFields out;
  out.address = static_cast<std::uint64_t>(address.evaluate(args, integer));
  auto nonNegative = [&](const HostExpression &e, const char *what) {
    std::int64_t v = e.evaluate(args, integer);
    if (v < 0)
      throw std::invalid_argument(std::string("tensor map ") + what + " '" +
                                  e.text() + "' is negative (" +
                                  std::to_string(v) + ")");
    return static_cast<std::uint64_t>(v);
  };
  for (const HostExpression &e : dims)
    out.dims.push_back(nonNegative(e, "extent"));
  for (const HostExpression &e : strides)
    out.strides.push_back(nonNegative(e, "stride"));
  return out;
}
