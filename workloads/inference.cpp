#include "workloads/inference.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "base/text.h"
#include "workloads/quantization.h"

namespace podsim {
namespace {

using P = ParamSpec;

StepKind kind_of(const std::string& s) {
  if (s == "prefill") return StepKind::Prefill;
  if (s == "decode") return StepKind::Decode;
  if (s == "mixed") return StepKind::Mixed;
  if (s == "generate") return StepKind::Generate;
  return StepKind::Train;
}

DType dtype_of(const std::string& s) {
  if (s == "int8") return DType::I8;
  if (s == "fp8") return DType::F8;
  if (s == "fp32") return DType::F32;
  return DType::BF16;
}

std::string ll(int64_t v) { return std::to_string(v); }

// A key that belongs to other steps, set for this one.
void refuse(const ParamSet& p, const std::string& key, const std::string& step, const std::string& which) {
  if (!p.has(key)) return;
  throw Error(Err::BadChoice, p.where(key),
              key + " applies to workload.step " + which + ", but workload.step is " + step + "; drop it", key);
}

// A list of one entry per sequence must have workload.batch entries.
void check_batch(const ParamSet& p, const std::string& key, size_t n) {
  const int64_t batch = p.i("workload.batch");
  if (static_cast<int64_t>(n) == batch) return;
  throw Error(Err::LengthMismatch, p.where(key),
              key + " gives " + ll(static_cast<int64_t>(n)) + " sequences but workload.batch is " + ll(batch) +
                  "; give one entry per sequence (or set batch: " + ll(static_cast<int64_t>(n)) + ")",
              key);
}

// "NEW+CACHED" -> (new, cached).
std::pair<int64_t, int64_t> parse_chunk(const ParamSet& p, const std::string& text) {
  const size_t plus = text.find('+');
  auto number = [](const std::string& s) {
    if (s.empty() || s.size() > 12) return int64_t(-1);
    for (char c : s)
      if (!std::isdigit(static_cast<unsigned char>(c))) return int64_t(-1);
    return static_cast<int64_t>(std::stoll(s));
  };
  const int64_t fresh = plus == std::string::npos ? -1 : number(text.substr(0, plus));
  const int64_t cached = plus == std::string::npos ? -1 : number(text.substr(plus + 1));
  if (fresh < 1 || cached < 0)
    throw Error(Err::WrongType, p.where("workload.chunks"),
                "workload.chunks entry '" + text + "' is not NEW+CACHED with NEW >= 1 new tokens after CACHED >= 0 "
                "cached ones, e.g. \"512+0\" (a first prefill chunk), \"512+512\", \"1+1000\" (a decode)",
                "workload.chunks");
  return {fresh, cached};
}

// The number format's MXU mode, on a chip that may lack it: fp8 needs hardware.chip.mxu.fp8_rate > 0, int8
// activations (the int8 MXU mode) hardware.chip.mxu.int8_rate > 0.
void check_format(const ParamSet& p, const std::string& key, DType t, bool mxu) {
  const std::string rate = t == DType::F8 ? "hardware.chip.mxu.fp8_rate" : "hardware.chip.mxu.int8_rate";
  if (!quantized_type(t) || !p.has(rate) || p.i(rate) > 0) return;
  if (t == DType::I8 && !mxu) return;  // int8 storage dequantized on the vector unit needs no int8 MXU mode
  const std::string chip = p.has("hardware.preset") ? p.s("hardware.preset") : std::string("this chip");
  const std::string instead = t == DType::F8 ? "use bf16 or int8 on this chip"
                                             : "leave workload.activation_dtype unset (int8 weights read as bf16)";
  throw Error(Err::NumberFormat, p.where(key),
              key + " = " + dtype_name(t) + ", but " + chip + " has no " + dtype_name(t) + " mode on its MXU (" +
                  rate + " = 0); " + instead,
              key);
}

}  // namespace

int64_t InferenceStep::new_tokens() const {
  int64_t n = 0;
  for (int64_t f : seqs.fresh) n += f;
  return n;
}

int64_t InferenceStep::real_sequences() const { return static_cast<int64_t>(seqs.fresh.size()) - pad_sequences; }

int64_t InferenceStep::real_places() const {
  int64_t n = 0;
  for (int64_t i = 0; i < real_sequences(); ++i) n += seqs.width.at(static_cast<size_t>(i));
  return n;
}

std::vector<ParamSpec> inference_param_specs() {
  return {
      P::choice("workload.step", {"train", "prefill", "decode", "mixed", "generate"},
                "What the step is (docs/serving.md): train (forward, backward, optimizer); prefill (prompts through "
                "the model, their keys and values written to the KV cache, each prompt's first token sampled); "
                "decode (one token more for each sequence, attending over its cache); mixed (chunks of prefill "
                "and decodes in one iteration, vLLM's chunked prefill); generate (a prefill and workload.generate "
                "- 1 decodes in one step, each fed the token the one before sampled).")
          .def("train"),
      P::int_list("workload.prompt_lengths",
                  "prefill: the tokens of each prompt (ragged; one entry per sequence of workload.batch); default: "
                  "every prompt workload.seq_len tokens.")
          .length(1, 1 << 16)
          .optional(),
      P::choice("workload.prefill_padding", {"none", "bucket", "max"},
                "prefill: how ragged prompts are padded, and so how many tokens the step computes: none (packed one "
                "after another, as vLLM batches them), bucket (each to the next power of two, as JetStream pads a "
                "prompt to its prefill bucket), max (every prompt to the longest: a static batch).")
          .def("none"),
      P::integer("workload.context", "decode: tokens already cached for every sequence.")
          .range(0, 1LL << 30)
          .optional(),
      P::int_list("workload.context_lengths",
                  "decode: the tokens already cached for each sequence (one entry per sequence of workload.batch).")
          .length(1, 1 << 16)
          .optional(),
      P::text_list("workload.chunks",
                   "mixed: one \"NEW+CACHED\" per sequence (as many as workload.batch): NEW tokens processed after "
                   "CACHED already in the sequence's cache; a decode is \"1+CTX\", a first prefill chunk \"512+0\".")
          .length(1, 1 << 16)
          .optional(),
      P::integer("workload.generate",
                 "generate: tokens each sequence generates, the first sampled by the prefill of its prompt.")
          .range(1, 1 << 16)
          .optional(),
      P::integer("workload.max_context",
                 "The model's context window (Llama 2: 4096, vLLM's max-model-len): a sequence's cached and new "
                 "tokens together may not exceed it. Unset: not checked.")
          .range(1, 1LL << 30)
          .optional(),
      P::integer("workload.kv_capacity",
                 "Places of KV cache held per sequence (JetStream's cache length); default: what the iteration's "
                 "longest sequence needs.")
          .range(1, 1LL << 30)
          .optional(),
      P::integer("workload.kv_sequences",
                 "Sequences whose KV caches are resident in HBM (the engine's slots or pages); default: the "
                 "iteration's sequences. Those beyond the iteration's only take memory.")
          .range(1, 1 << 20)
          .optional(),
      P::choice("workload.kv_dtype", {"bf16", "fp32", "int8", "fp8"},
                "The KV cache's type (default workload.dtype): int8 or fp8 store each cached token's head quantized "
                "with one scale (absmax / qmax over its head_dim values), dequantized as attention reads it.")
          .optional(),
      P::choice("workload.activation_dtype", {"bf16", "fp32", "int8", "fp8"},
                "The type the layers' matmuls read their activations in (default workload.dtype). int8 (with "
                "workload.weight_dtype int8) quantizes each activation row dynamically and runs the products at the "
                "MXU's int8 rate (AQT's weights-and-activations mode); fp8 likewise with fp8 weights.")
          .optional(),
      P::choice("workload.sampling", {"greedy", "top_k", "top_p"},
                "How the next token is sampled on the chip: greedy (argmax), top_k (from the softmax over the "
                "workload.top_k largest logits), top_p (nucleus: over the smallest set whose probabilities reach "
                "workload.top_p).")
          .def("greedy"),
      P::integer("workload.top_k", "sampling: top_k: the candidates kept per sequence.").range(1, 1 << 20).optional(),
      P::real("workload.top_p", "sampling: top_p: the probability mass kept.").positive(1).optional(),
      P::integer("workload.pad_sequences",
                 "prefill, decode, mixed: empty sequences the step computes beside its own, as a serving engine "
                 "pads its batch (JetStream's empty decode slots, vLLM's padded request bucket): each a row of "
                 "logits and a sample that are discarded, with no KV cache read or written (a length of 0). Left "
                 "out of model FLOPs and tokens. The serving engine sets it (serving.engine.batch_padding).")
          .range(0, 1 << 16)
          .def("0"),
      P::integer("workload.pad_tokens",
                 "prefill, decode, mixed: token places the step computes through every layer that belong to no "
                 "sequence (an empty slot's token, vLLM's padded token bucket), one to each of "
                 "workload.pad_sequences first, the rest after them (a packed row). Left out of model FLOPs and "
                 "tokens. The serving engine sets it (serving.engine.batch_padding).")
          .range(0, 1 << 24)
          .def("0"),
      P::integer("workload.kv_block",
                 "Keys per block of the decode attention kernel (vLLM TPU's pages of a block, a block of "
                 "JetStream's contiguous slot): the cache streams from HBM in such blocks, a sequence's last one "
                 "read whole. The engines take it as a kernel argument; 128 is podsim's choice, not a published "
                 "default.")
          .range(1, 1 << 20)
          .def("128"),
  };
}

bool inference_step(const ParamSet& p) {
  return p.has("workload.step") && kind_of(p.s("workload.step")) != StepKind::Train;
}

int64_t padded_length(const std::string& padding, int64_t n, int64_t longest) {
  if (padding == "max") return longest;
  if (padding != "bucket") return n;
  int64_t b = 1;
  while (b < n) b *= 2;
  return b;
}

InferenceStep inference_config(const ParamSet& p) {
  InferenceStep s;
  const std::string step = p.s("workload.step");
  s.kind = kind_of(step);
  if (s.kind == StepKind::Train) return s;
  const bool prefill = s.kind == StepKind::Prefill || s.kind == StepKind::Generate;
  if (!prefill) {
    refuse(p, "workload.prompt_lengths", step, "prefill");
    if (p.where("workload.prefill_padding").file.size() && p.s("workload.prefill_padding") != "none")
      refuse(p, "workload.prefill_padding", step, "prefill");
  }
  if (s.kind == StepKind::Generate) refuse(p, "workload.prompt_lengths", step, "prefill");
  if (s.kind != StepKind::Decode) {
    refuse(p, "workload.context", step, "decode");
    refuse(p, "workload.context_lengths", step, "decode");
  }
  if (s.kind != StepKind::Mixed) refuse(p, "workload.chunks", step, "mixed");
  if (s.kind != StepKind::Generate) refuse(p, "workload.generate", step, "generate");
  const int64_t batch = p.i("workload.batch");
  std::vector<int64_t> fresh, cached;
  std::string lengths_key = "workload.batch";  // where a length past the context comes from
  switch (s.kind) {
    case StepKind::Prefill: case StepKind::Generate:
      if (p.has("workload.prompt_lengths")) {
        fresh = p.ints("workload.prompt_lengths");
        check_batch(p, "workload.prompt_lengths", fresh.size());
        lengths_key = "workload.prompt_lengths";
        for (int64_t n : fresh)
          if (n < 1)
            throw Error(Err::OutOfRange, p.where(lengths_key), "workload.prompt_lengths has a prompt of " + ll(n) +
                        " tokens; each prompt has at least 1", lengths_key);
      } else {
        fresh.assign(static_cast<size_t>(batch), p.i("workload.seq_len"));
        lengths_key = "workload.seq_len";
      }
      cached.assign(fresh.size(), 0);
      break;
    case StepKind::Decode:
      if (p.has("workload.context_lengths")) {
        cached = p.ints("workload.context_lengths");
        check_batch(p, "workload.context_lengths", cached.size());
        lengths_key = "workload.context_lengths";
        for (int64_t c : cached)
          if (c < 0)
            throw Error(Err::OutOfRange, p.where(lengths_key), "workload.context_lengths has " + ll(c) +
                        " cached tokens; a count is 0 or more", lengths_key);
      } else if (p.has("workload.context")) {
        cached.assign(static_cast<size_t>(batch), p.i("workload.context"));
        lengths_key = "workload.context";
      } else {
        throw Error(Err::MissingKey, p.where("workload.step"),
                    "workload.step: decode needs the tokens each sequence has cached: workload.context (all alike) "
                    "or workload.context_lengths (one per sequence)",
                    "workload.context");
      }
      fresh.assign(cached.size(), 1);
      break;
    case StepKind::Mixed: {
      if (!p.has("workload.chunks"))
        throw Error(Err::MissingKey, p.where("workload.step"),
                    "workload.step: mixed needs workload.chunks, one \"NEW+CACHED\" per sequence", "workload.chunks");
      const auto& chunks = p.strings("workload.chunks");
      check_batch(p, "workload.chunks", chunks.size());
      for (const std::string& c : chunks) {
        const auto [n, k] = parse_chunk(p, c);
        fresh.push_back(n);
        cached.push_back(k);
      }
      lengths_key = "workload.chunks";
      break;
    }
    case StepKind::Train: break;
  }
  if (s.kind == StepKind::Generate) {
    if (!p.has("workload.generate"))
      throw Error(Err::MissingKey, p.where("workload.step"),
                  "workload.step: generate needs workload.generate, the tokens each sequence generates",
                  "workload.generate");
    s.generate = p.i("workload.generate");
  }
  // The longest sequence the step holds: its cached and new tokens (a generated sequence's last token is sampled,
  // never fed back: its cache holds the prompt and the tokens before it).
  int64_t need = 0;
  size_t longest = 0;
  for (size_t i = 0; i < fresh.size(); ++i) {
    const int64_t n = cached[i] + fresh[i] + (s.generate > 0 ? s.generate - 1 : 0);
    if (n > need) need = n, longest = i;
  }
  if (p.has("workload.max_context") && need + (s.generate > 0 ? 1 : 0) > p.i("workload.max_context")) {
    const int64_t limit = p.i("workload.max_context");
    throw Error(Err::ContextTooLong, p.where(lengths_key),
                "sequence " + ll(static_cast<int64_t>(longest)) + " holds " + ll(need + (s.generate > 0 ? 1 : 0)) +
                    " tokens (" + ll(cached[longest]) + " cached, " + ll(fresh[longest]) + " new" +
                    (s.generate > 0 ? ", " + ll(s.generate) + " generated" : std::string()) +
                    "), past the model's context of workload.max_context = " + ll(limit) +
                    "; shorten it to at most " + ll(limit) + " tokens",
                lengths_key);
  }
  s.capacity = p.has("workload.kv_capacity") ? p.i("workload.kv_capacity") : need;
  if (s.capacity < need)
    throw Error(Err::KvCacheTooSmall, p.where("workload.kv_capacity"),
                "workload.kv_capacity = " + ll(s.capacity) + " places per sequence cannot hold sequence " +
                    ll(static_cast<int64_t>(longest)) + ", which needs " + ll(need) +
                    " (its cached and new tokens); give at least " + ll(need),
                "workload.kv_capacity");
  const int64_t n = static_cast<int64_t>(fresh.size());
  s.resident = p.has("workload.kv_sequences") ? p.i("workload.kv_sequences") : n + p.i("workload.pad_sequences");
  if (s.resident < n)
    throw Error(Err::KvCacheTooSmall, p.where("workload.kv_sequences"),
                "workload.kv_sequences = " + ll(s.resident) + " resident caches cannot hold the iteration's " +
                    ll(n) + " sequences; give at least " + ll(n),
                "workload.kv_sequences");
  // Widths: what each sequence takes in the activations.
  const std::string padding = prefill ? p.s("workload.prefill_padding") : "none";
  const int64_t longest_fresh = *std::max_element(fresh.begin(), fresh.end());
  std::vector<int64_t> width;
  for (int64_t f : fresh) width.push_back(padded_length(padding, f, longest_fresh));
  // The engine's batch padding: empty sequences after the real ones, the padded places one to each, the rest to the
  // last of them (or, with none, past the last sequence of a packed row).
  s.pad_sequences = p.i("workload.pad_sequences");
  s.pad_tokens = p.i("workload.pad_tokens");
  if (s.kind == StepKind::Generate) {
    for (const char* key : {"workload.pad_sequences", "workload.pad_tokens"})
      if (p.i(key) > 0)
        throw Error(Err::BadChoice, p.where(key),
                    std::string(key) + " pads a serving engine's iteration (prefill, decode or mixed); workload.step "
                    "generate is one static batch without padding; drop it",
                    key);
  }
  if (s.resident < n + s.pad_sequences)
    throw Error(Err::KvCacheTooSmall, p.where("workload.kv_sequences"),
                "workload.kv_sequences = " + ll(s.resident) + " resident caches cannot hold the iteration's " + ll(n) +
                    " sequences and its " + ll(s.pad_sequences) + " padded ones (workload.pad_sequences); give at "
                    "least " + ll(n + s.pad_sequences),
                "workload.kv_sequences");
  int64_t left = s.pad_tokens;
  for (int64_t i = 0; i < s.pad_sequences; ++i, left = std::max<int64_t>(0, left - 1)) {
    fresh.push_back(0);
    cached.push_back(0);
    width.push_back(left > 0 ? 1 : 0);
  }
  if (s.pad_sequences > 0) width.back() += left, left = 0;
  const bool uniform = left == 0 && width.front() > 0 &&
                       std::all_of(width.begin(), width.end(), [&](int64_t w) { return w == width.front(); });
  s.seqs.fresh = fresh;
  s.seqs.cached = cached;
  s.seqs.packed = !uniform;
  s.seqs.width = width;
  if (uniform) {
    s.rows = static_cast<int64_t>(width.size());
    s.row_len = width.front();
  } else {
    s.rows = 1;
    s.row_len = left;
    for (int64_t w : width) s.row_len += w;
  }
  s.flash = prefill && uniform;
  // Types.
  const std::string base = p.s("workload.dtype");
  s.weight = dtype_of(p.has("workload.weight_dtype") ? p.s("workload.weight_dtype") : base);
  s.kv = dtype_of(p.has("workload.kv_dtype") ? p.s("workload.kv_dtype") : base);
  s.activation = dtype_of(p.has("workload.activation_dtype") ? p.s("workload.activation_dtype") : base);
  if (quantized_type(s.activation) && s.weight != s.activation)
    throw Error(Err::NumberFormat, p.where("workload.activation_dtype"),
                std::string("workload.activation_dtype = ") + dtype_name(s.activation) + " quantizes the matmuls' "
                    "activations to multiply them with weights of the same type, but workload.weight_dtype is " +
                    dtype_name(s.weight) + "; set weight_dtype: " + dtype_name(s.activation) +
                    " (weights and activations) or leave activation_dtype unset (weight-only)",
                "workload.activation_dtype");
  check_format(p, "workload.activation_dtype", s.activation, true);
  check_format(p, "workload.weight_dtype", s.weight, false);
  check_format(p, "workload.kv_dtype", s.kv, false);
  // Sampling.
  s.sampling.sampling = p.s("workload.sampling");
  const int64_t vocab = p.i("workload.vocab");
  if (s.sampling.sampling == "top_k") {
    if (!p.has("workload.top_k"))
      throw Error(Err::MissingKey, p.where("workload.sampling"),
                  "workload.sampling: top_k needs workload.top_k, the candidates kept", "workload.top_k");
    s.sampling.top_k = p.i("workload.top_k");
    if (s.sampling.top_k > vocab)
      throw Error(Err::OutOfRange, p.where("workload.top_k"),
                  "workload.top_k = " + ll(s.sampling.top_k) + " keeps more candidates than the vocabulary's " +
                      ll(vocab) + " tokens; choose at most " + ll(vocab),
                  "workload.top_k");
  }
  for (const char* key : {"workload.top_k", "workload.top_p"})
    if (p.has(key) && s.sampling.sampling != std::string(key).substr(9))
      throw Error(Err::BadChoice, p.where(key),
                  std::string(key) + " applies to workload.sampling: " + std::string(key).substr(9) +
                      ", but workload.sampling is " + s.sampling.sampling + "; drop it or set that sampling",
                  key);
  if (s.sampling.sampling == "top_p") {
    if (!p.has("workload.top_p"))
      throw Error(Err::MissingKey, p.where("workload.sampling"),
                  "workload.sampling: top_p needs workload.top_p, the probability mass kept", "workload.top_p");
    s.sampling.top_p = p.f("workload.top_p");
  }
  s.sampling.seed = p.has("run.seed") ? static_cast<uint64_t>(p.i("run.seed")) : 1;
  s.kv_block = p.i("workload.kv_block");
  return s;
}

}  // namespace podsim
