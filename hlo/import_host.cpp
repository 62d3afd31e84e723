// The HLO importer's host transfers: infeed and outfeed, send and recv to and from the host, and host offloading's
// placement calls (MoveToHost, MoveToDevice, annotate_device_placement), each array a to_host or from_host transfer
// over the chip's host link.
#include "hlo/importer.h"

namespace podsim::hlo::import_detail {

// infeed(token): the data the host sends, over the host link into HBM. Each array arrives as a from_host
// transfer of a value the host holds (a step input read by nothing else, which the memory plan keeps off HBM).
Value Importer::infeed(const Instruction& in) {
  if (!in.shape.is_tuple() || in.shape.tuple.empty()) fail(in, Err::HloInvalid, "an infeed's shape is (data, token)");
  Value v;
  v.tuple = true;
  v.elems.push_back(from_host(in, in.shape.tuple[0]));
  v.elems.push_back(Value{});
  return v;
}

Value Importer::from_host(const Instruction& in, const Shape& data) {
  const std::string base = m_prefix + in.name + m_copy_suffix;
  std::function<Value(const Shape&, const std::string&)> arrive = [&](const Shape& s, const std::string& name) {
    Value v;
    if (s.is_tuple()) {
      v.tuple = true;
      for (size_t i = 0; i < s.tuple.size(); ++i) v.elems.push_back(arrive(s.tuple[i], name + "." + std::to_string(i)));
      return v;
    }
    if (!s.is_array() || s.elements() == 0) return v;
    no_kernel(in, in.opcode + " (the host's data)");
    const TensorId host = tensor(name + ".host", s, TensorRole::Input);
    const TensorId x = tensor(name, s, TensorRole::Input);
    add(in, OpKind::FromHost, {host}, {x}, {}, name.substr(base.size()));
    return value_of(x);
  };
  return arrive(data, base);
}

// outfeed(data, token): each array leaves for the host over the host link (a to_host transfer).
Value Importer::outfeed(const Instruction& in, const std::vector<Value>& vals) {
  if (vals.empty()) fail(in, Err::HloInvalid, "an outfeed takes the data and a token");
  to_host(in, vals[0]);
  return Value{};
}

void Importer::to_host(const Instruction& in, const Value& v) {
  std::vector<TensorId> xs;
  need_leaves(v, xs);
  for (size_t i = 0; i < xs.size(); ++i) {
    std::string suffix;
    if (xs.size() > 1) {
      suffix = ".";
      suffix += std::to_string(i);
    }
    TensorInfo t = m_out.graph.tensor(xs[i]);
    t.name = m_prefix + in.name + m_copy_suffix + suffix;
    t.role = TensorRole::Activation;
    t.updates = -1;
    const TensorId h = m_out.graph.add_tensor(t);
    add(in, OpKind::ToHost, {xs[i]}, {h}, {}, suffix);
  }
}

Value Importer::host_placement(const Instruction& in, const std::vector<Value>& vals, bool to_host) {
  if (vals.size() != 1 || vals[0].tuple || (vals[0].t < 0 && vals[0].pending < 0) || !in.shape.is_array())
    fail(in, Err::HloUnsupported, "a host placement of other than one array operand");
  const TensorId x = need(vals[0]);
  if (m_out.graph.tensor(x).elements() != in.shape.elements())
    fail(in, Err::HloUnsupported, "a host placement that changes its operand's shape: the module is not "
                                  "SPMD-partitioned (podsim runs per-device modules)");
  if (to_host == (m_on_host.count(x) > 0)) {  // already where it is to be
    if (shape_of(x) == in.shape.dims) return value_of(x);
    return value_of(make(in, OpKind::Bitcast, {x}));
  }
  TensorInfo t = m_out.graph.tensor(x);
  t.name = m_prefix + in.name + m_copy_suffix;
  t.shape = in.shape.dims;
  t.role = TensorRole::Activation;
  t.updates = -1;
  const TensorId y = m_out.graph.add_tensor(t);
  add(in, to_host ? OpKind::ToHost : OpKind::FromHost, {x}, {y});
  return value_of(y);
}

Value Importer::send_recv(const Instruction& in, const std::vector<Value>& vals) {
  const std::string& op = in.opcode;
  const bool host = word(in, "is_host_transfer").value_or("false") == "true";
  if (op == "send-done") return Value{};
  if (op == "recv-done") {  // (data, token)
    Value v;
    v.tuple = true;
    v.elems.push_back(!vals.empty() && vals[0].tuple && !vals[0].elems.empty() ? vals[0].elems[0] : Value{});
    v.elems.push_back(Value{});
    return v;
  }
  // send: (data, context, token); recv: the same, the data arriving.
  const Shape* data = in.shape.is_tuple() && !in.shape.tuple.empty() ? &in.shape.tuple[0] : nullptr;
  if (!data) fail(in, Err::HloInvalid, "a " + op + "'s shape is (data, context, token)");
  std::vector<TensorId> moved;
  if (op == "send" && !vals.empty()) need_leaves(vals[0], moved);
  const bool empty = op == "send" ? moved.empty() : data->bytes() == 0;
  if (!host && !empty)
    fail(in, Err::HloUnsupported, "a " + op + " between devices (podsim runs host transfers, is_host_transfer=true, and "
                                  "collective-permutes between devices)");
  Value v;
  v.tuple = true;
  if (op == "send") {
    to_host(in, vals.empty() ? Value{} : vals[0]);
    v.elems.push_back(vals.empty() ? Value{} : vals[0]);
  } else {
    v.elems.push_back(from_host(in, *data));
  }
  v.elems.push_back(Value{});
  v.elems.push_back(Value{});
  return v;
}

}  // namespace podsim::hlo::import_detail
