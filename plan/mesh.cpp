#include "plan/mesh.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "base/text.h"

namespace podsim {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep) out.emplace_back();
    else out.back() += c;
  }
  return out;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

int parse_dim(const std::string& s) {
  if (s == "x") return 0;
  if (s == "y") return 1;
  if (s == "z") return 2;
  return -1;
}

std::string factor_text(const MeshFactor& f, int64_t dim_size, const std::string& dim) {
  std::string t = dim;
  if (f.size != dim_size) t += strprintf(":%lld", static_cast<long long>(f.size));
  if (f.stride > 1) t += strprintf(" every %lld", static_cast<long long>(f.stride));
  return t;
}

}  // namespace

std::string Mesh::dim_name(int d) const { return d >= m_ici ? "slice" : std::string(1, "xyz"[d]); }

Torus Mesh::torus() const {
  const int64_t slices = static_cast<int>(m_dims.size()) > m_ici ? m_dims[m_ici] : 1;
  return Torus(std::vector<int64_t>(m_dims.begin(), m_dims.begin() + m_ici),
               std::vector<bool>(m_wrap.begin(), m_wrap.begin() + m_ici), slices);
}

bool Mesh::spans_slices(int axis) const {
  for (const MeshFactor& f : m_axes.at(static_cast<size_t>(axis)).factors)
    if (f.dim == slice_dim() && f.size > 1) return true;
  return false;
}

namespace {

// Chip-id distance between neighbours along torus dimension `d` (ids are row-major, x fastest).
int64_t id_stride(const Torus& t, int d) {
  int64_t s = 1;
  for (int i = 0; i < d; ++i) s *= t.dims()[i];
  return s;
}

}  // namespace

// Both run per message: no allocation.
int64_t MeshGroup::chip_of(int64_t r, const Torus& torus) const {
  int64_t chip = torus.chip(coords);
  for (size_t i = 0; i < factors.size(); ++i) {
    const MeshFactor& f = factors[i];
    const int64_t want = r % f.size;
    r /= f.size;
    const int64_t cur = (coords[f.dim] / f.stride) % f.size;
    chip += (want - cur) * f.stride * id_stride(torus, f.dim);
  }
  return chip;
}

int64_t MeshGroup::rank_of(int64_t chip, const Torus& torus) const {
  int64_t r = 0, scale = 1;
  for (const MeshFactor& f : factors) {
    const int64_t coord = (chip / id_stride(torus, f.dim)) % torus.dims()[f.dim];
    r += ((coord / f.stride) % f.size) * scale;
    scale *= f.size;
  }
  return r;
}

std::string MeshGroup::describe() const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < factors.size(); ++i) {
    const MeshFactor& f = factors[i];
    std::string kind = shape.wrap[i] ? (f.stride > 1 ? "strided ring" : "ring") : (f.stride > 1 ? "strided line" : "line");
    const bool slices = i < shape.dcn.size() && shape.dcn[i];
    std::string s = kind + " of " + std::to_string(f.size) + " on " + (slices ? "slices" : std::string(1, "xyz"[f.dim]));
    if (f.stride > 1) s += " (every " + std::to_string(f.stride) + " chips)";
    parts.push_back(s);
  }
  return parts.empty() ? "a single chip" : join(parts, " x ");
}

Mesh Mesh::torus_axes(const Torus& t) {
  Mesh m;
  m.m_dims = t.dims();
  m.m_wrap = t.wrap();
  m.m_ici = t.ici_ndims();
  for (int d = t.ndims(); d-- > 0;) {  // outermost first, so x is the fastest, as in chip ids
    MeshAxis a;
    a.name = t.dim_name(d);
    a.size = t.dims()[d];
    a.factors.push_back({d, a.size, 1});
    m.m_axes.push_back(a);
  }
  return m;
}

Mesh Mesh::layout(const std::vector<std::string>& names, const std::vector<int64_t>& sizes, const Torus& t,
                  const std::vector<std::string>& placement, const std::vector<std::string>& contiguous,
                  const std::vector<std::string>& dcn_axes) {
  auto fail = [](const std::string& what) -> void { throw Error(Err::BadMesh, what); };
  if (names.size() != sizes.size())
    fail(strprintf("the mesh names %zu axes but gives %zu sizes", names.size(), sizes.size()));
  if (!placement.empty() && placement.size() != names.size())
    fail(strprintf("mesh placement lists %zu entries for %zu axes (one per axis, \"\" for automatic)",
                   placement.size(), names.size()));
  int64_t product = 1;
  for (size_t i = 0; i < names.size(); ++i) {
    if (sizes[i] < 1) fail("mesh axis '" + names[i] + "' has size " + std::to_string(sizes[i]));
    for (size_t j = 0; j < i; ++j)
      if (names[j] == names[i]) fail("mesh axis '" + names[i] + "' is named twice");
    product *= sizes[i];
  }
  std::vector<std::string> shown;
  for (size_t i = 0; i < names.size(); ++i) shown.push_back(names[i] + " " + std::to_string(sizes[i]));
  if (product != t.chips())
    fail("the mesh axes (" + join(shown, " x ") + ") make " + std::to_string(product) + " devices but the pod has " +
         std::to_string(t.chips()) + " chips; the sizes must multiply to the chip count");
  for (const std::string& d : dcn_axes)
    if (std::find(names.begin(), names.end(), d) == names.end())
      fail("mesh.dcn_axes names '" + d + "', which is not an axis of the mesh (" + join(names, ", ") + ")");
  Mesh m;
  m.m_dims = t.dims();
  m.m_wrap = t.wrap();
  m.m_ici = t.ici_ndims();
  m.m_axes.resize(names.size());
  const int ici = t.ici_ndims();
  std::vector<int64_t> taken(t.dims().size(), 1);  // product of the factor sizes placed on each dimension so far
  auto left = [&](int d) { return t.dims()[d] / taken[d]; };
  auto remaining_text = [&]() {
    std::vector<std::string> r;
    for (int d = 0; d < ici; ++d)
      if (left(d) > 1) r.push_back(t.dim_name(d) + ":" + std::to_string(left(d)));
    return r.empty() ? std::string("nothing") : join(r, ", ");
  };
  // The DCN axes take the slices, outermost first; what an axis has beyond its slices lies inside them.
  std::vector<int64_t> need_in_slice = sizes;
  std::vector<MeshFactor> over_slices(names.size(), MeshFactor{-1, 1, 1});
  if (const int sd = t.slice_dim(); sd >= 0) {
    for (size_t k = 0; k < names.size(); ++k) {
      if (std::find(dcn_axes.begin(), dcn_axes.end(), names[k]) == dcn_axes.end()) continue;
      const int64_t g = std::gcd(sizes[k], left(sd));
      if (g <= 1) continue;
      over_slices[k] = {sd, g, taken[sd]};
      taken[sd] *= g;
      need_in_slice[k] = sizes[k] / g;
    }
    if (left(sd) != 1)
      fail("the pod has " + std::to_string(t.slices()) + " slices but the axes over the data-center network (" +
           (dcn_axes.empty() ? std::string("none") : join(dcn_axes, ", ")) + ") span only " +
           std::to_string(t.slices() / left(sd)) + " of them; mesh.dcn_axes names the axes that span the slices, " +
           "and their sizes must multiply to a multiple of the slice count, outermost first (MaxText's dcn_* "
           "parallelism; e.g. mesh: {axes: [data, fsdp], shape: [" + std::to_string(t.slices()) + ", " +
           std::to_string(t.slice_chips()) + "], dcn_axes: [data]})");
  }
  // Contiguous axes first: a run of neighbouring chips on the outermost dimension that holds the axis whole.
  // Only when nothing is placed explicitly (explicit placements are the user's layout, which this must not upset).
  std::vector<bool> done(names.size(), false);
  const bool any_explicit = std::any_of(placement.begin(), placement.end(), [](const std::string& s) { return !s.empty(); });
  for (size_t k = 0; k < names.size() && !any_explicit; ++k) {
    if (sizes[k] < 2 || over_slices[k].dim >= 0 ||
        std::find(contiguous.begin(), contiguous.end(), names[k]) == contiguous.end())
      continue;
    for (int d = ici; d-- > 0;) {
      if (taken[d] != 1 || t.dims()[d] % sizes[k] != 0) continue;
      MeshAxis& a = m.m_axes[k];
      a.name = names[k];
      a.size = sizes[k];
      a.factors.push_back({d, sizes[k], 1});
      taken[d] *= sizes[k];
      done[k] = true;
      break;
    }
  }
  for (size_t k = names.size(); k-- > 0;) {  // innermost (last) axis first
    if (done[k]) continue;
    MeshAxis& a = m.m_axes[k];
    a.name = names[k];
    a.size = sizes[k];
    int64_t need = need_in_slice[k];
    const std::string spec = placement.empty() ? "" : placement[k];
    if (!spec.empty()) {
      for (const std::string& piece : split(spec, ',')) {
        std::string p = trim(piece);
        std::string dn = p.substr(0, p.find(':'));
        int d = parse_dim(dn);
        if (d < 0 || d >= ici)
          fail("mesh axis '" + a.name + "' is placed on '" + dn + "', which the " + std::to_string(ici) +
               "-D torus does not have (valid: x, y" + (ici == 3 ? ", z" : "") +
               "; axes span slices through mesh.dcn_axes)");
        int64_t s = left(d);
        if (p.find(':') != std::string::npos) {
          try {
            s = std::stoll(p.substr(p.find(':') + 1));
          } catch (const std::exception&) {
            fail("cannot read the placement '" + p + "' of mesh axis '" + a.name + "'; write e.g. \"y:8\"");
          }
        }
        if (s < 1 || left(d) % s != 0)
          fail("mesh axis '" + a.name + "' takes " + std::to_string(s) + " coordinates of " + t.dim_name(d) +
               " but " + std::to_string(left(d)) + " are left there, which " + std::to_string(s) +
               " does not divide (left of the torus: " + remaining_text() + ")");
        if (s == 1) continue;
        a.factors.push_back({d, s, taken[d]});
        taken[d] *= s;
        need = need % s == 0 ? need / s : -1;
        if (need < 0) break;
      }
      if (need != 1)
        fail("mesh axis '" + a.name + "' of size " + std::to_string(a.size) + " is placed on '" + spec +
             "', which does not give exactly " + std::to_string(need_in_slice[k]) + " chips" +
             (over_slices[k].dim >= 0 ? " inside each slice" : ""));
      if (over_slices[k].dim >= 0) a.factors.push_back(over_slices[k]);  // the slowest factor
      continue;
    }
    for (int d = 0; d < ici && need > 1; ++d) {
      int64_t g = std::gcd(need, left(d));
      if (g <= 1) continue;
      a.factors.push_back({d, g, taken[d]});
      taken[d] *= g;
      need /= g;
    }
    if (need != 1)
      fail("mesh axis '" + a.name + "' of size " + std::to_string(a.size) +
           " cannot be laid out on what is left of the torus (" + remaining_text() +
           "); choose sizes that divide the torus dimensions, or place the axis with mesh.placement");
    if (over_slices[k].dim >= 0) a.factors.push_back(over_slices[k]);  // the slowest factor
  }
  return m;
}

int64_t Mesh::devices() const {
  int64_t n = 1;
  for (const auto& a : m_axes) n *= a.size;
  return n;
}

int Mesh::axis_index(const std::string& name) const {
  for (size_t i = 0; i < m_axes.size(); ++i)
    if (m_axes[i].name == name) return static_cast<int>(i);
  return -1;
}

int64_t Mesh::axis_size(const std::string& name) const {
  int i = axis_index(name);
  return i < 0 ? 1 : m_axes[i].size;
}

std::vector<std::string> Mesh::names() const {
  std::vector<std::string> out;
  for (const auto& a : m_axes) out.push_back(a.name);
  return out;
}

int64_t Mesh::coordinate(int64_t chip, int axis) const {
  const MeshAxis& a = m_axes.at(static_cast<size_t>(axis));
  const Torus t = torus();
  std::vector<int64_t> c = t.coords(chip);
  int64_t v = 0, mult = 1;
  for (const MeshFactor& f : a.factors) {
    v += ((c[f.dim] / f.stride) % f.size) * mult;
    mult *= f.size;
  }
  return v;
}

int64_t Mesh::index(int64_t chip, const std::vector<std::string>& axes) const {
  int64_t v = 0;
  for (const std::string& name : axes) {
    int i = axis_index(name);
    if (i < 0) throw Error(Err::Internal, "index along unknown mesh axis '" + name + "'");
    v = v * m_axes[i].size + coordinate(chip, i);
  }
  return v;
}

int64_t Mesh::size(const std::vector<std::string>& axes) const {
  int64_t n = 1;
  for (const std::string& name : axes) n *= axis_size(name);
  return n;
}

MeshGroup Mesh::group(int64_t chip, const std::vector<std::string>& axes, int64_t block) const {
  const Torus t = torus();
  MeshGroup g;
  g.coords = t.coords(chip);
  std::vector<std::string> names = axes.empty() ? this->names() : axes;
  std::vector<int64_t> rc;
  for (size_t k = names.size(); k-- > 0;) {  // the last axis named is the fastest
    int i = axis_index(names[k]);
    if (i < 0) throw Error(Err::Internal, "collective over unknown mesh axis '" + names[k] + "'");
    for (const MeshFactor& f : m_axes[i].factors) {
      g.factors.push_back(f);
      g.shape.dims.push_back(f.size);
      g.shape.wrap.push_back(m_wrap[f.dim] && f.size * f.stride == m_dims[f.dim]);
      g.shape.dcn.push_back(f.dim == slice_dim());
      rc.push_back((g.coords[f.dim] / f.stride) % f.size);
    }
  }
  if (block > 0 && block < g.shape.size()) {
    // The fastest factors up to `block` ranks; a factor that does not fit whole is cut (no longer a ring).
    if (g.shape.size() % block != 0)
      throw Error(Err::Internal, "a group of " + std::to_string(block) + " consecutive ranks does not divide " +
                                     std::to_string(g.shape.size()));
    MeshGroup b;
    b.coords = g.coords;
    int64_t have = 1;
    for (size_t i = 0; i < g.factors.size() && have < block; ++i) {
      MeshFactor f = g.factors[i];
      const bool whole = have * f.size <= block;
      if (!whole) f.size = block / have;
      if (have * f.size > block || block % (have * f.size) != 0)
        throw Error(Err::Internal, "a group of " + std::to_string(block) + " ranks does not fit the mesh factors");
      b.factors.push_back(f);
      b.shape.dims.push_back(f.size);
      b.shape.wrap.push_back(whole && g.shape.wrap[i]);
      b.shape.dcn.push_back(g.shape.dcn[i]);
      rc[i] %= f.size;
      have *= f.size;
    }
    rc.resize(b.factors.size());
    b.rank = b.shape.rank(rc);
    return b;
  }
  g.rank = g.shape.rank(rc);
  return g;
}

std::vector<int64_t> Mesh::members(int64_t chip, const std::vector<std::string>& axes, int64_t block) const {
  const Torus t = torus();
  MeshGroup g = group(chip, axes, block);
  std::vector<int64_t> out;
  for (int64_t r = 0; r < g.shape.size(); ++r) out.push_back(g.chip_of(r, t));
  return out;
}

std::string Mesh::describe() const {
  std::vector<std::string> parts;
  for (const auto& a : m_axes) {
    std::vector<std::string> fs;
    for (const auto& f : a.factors) fs.push_back(factor_text(f, m_dims[f.dim], dim_name(f.dim)));
    parts.push_back(a.name + " " + std::to_string(a.size) + (fs.empty() ? "" : " (" + join(fs, ", ") + ")"));
  }
  return join(parts, " x ");
}

}  // namespace podsim
