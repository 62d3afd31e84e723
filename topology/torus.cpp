#include "topology/torus.h"

namespace podsim {

Torus::Torus(std::vector<int64_t> dims, std::vector<bool> wrap, int64_t slices)
    : m_dims(std::move(dims)), m_wrap(std::move(wrap)) {
  m_wrap.resize(m_dims.size(), true);
  m_ici = static_cast<int>(m_dims.size());
  if (slices > 1) {  // a ring of slices: every slice has a neighbour each way round it
    m_dims.push_back(slices);
    m_wrap.push_back(true);
    m_slices = slices;
  }
  for (auto d : m_dims) m_chips *= d;
}

std::string Torus::dim_name(int d) const {
  if (d >= m_ici) return "slice";
  return std::string(1, "xyz"[d]);
}

std::vector<int64_t> Torus::coords(int64_t chip) const {
  std::vector<int64_t> c(m_dims.size());
  for (size_t i = 0; i < m_dims.size(); ++i) {
    c[i] = chip % m_dims[i];
    chip /= m_dims[i];
  }
  return c;
}

int64_t Torus::chip(const std::vector<int64_t>& c) const {
  int64_t id = 0;
  for (size_t i = m_dims.size(); i-- > 0;) id = id * m_dims[i] + c[i];
  return id;
}

int64_t Torus::shift(int64_t chip, int dim, int64_t delta) const {
  int64_t stride = 1;
  for (int i = 0; i < dim; ++i) stride *= m_dims[i];
  const int64_t n = m_dims[dim];
  const int64_t c = (chip / stride) % n;
  const int64_t v = ((c + delta) % n + n) % n;
  return chip + (v - c) * stride;
}

std::string Torus::direction_name(int dir) {
  static const char* axes = "xyz";
  return std::string(dir % 2 == 0 ? "+" : "-") + axes[dir / 2];
}

int64_t Torus::neighbor(int64_t chip, int dir) const {
  int dim = dir / 2;
  int64_t n = m_dims[dim];
  if (n < 2) return -1;
  std::vector<int64_t> c = coords(chip);
  int64_t v = c[dim] + (dir % 2 == 0 ? 1 : -1);
  if (v < 0 || v >= n) {
    if (!m_wrap[dim]) return -1;
    v = (v + n) % n;
  }
  c[dim] = v;
  return this->chip(c);
}

int Torus::next_hop(int64_t at, int64_t dst) const {
  if (at == dst) return -1;
  // Coordinates digit by digit, dimension 0 fastest (as coords() numbers them), without allocating: this runs
  // once per message per hop. The slice dimension has no link.
  for (int d = 0; d < m_ici; ++d) {
    const int64_t n = m_dims[d];
    const int64_t a = at % n, b = dst % n;
    at /= n;
    dst /= n;
    if (a == b) continue;
    int64_t fwd = ((b - a) % n + n) % n;  // hops going +
    if (!m_wrap[d]) return direction(d, b > a);
    int64_t back = n - fwd;
    if (fwd != back) return direction(d, fwd < back);
    return direction(d, a % 2 == 0);
  }
  return -1;
}

int Torus::hops(int64_t src, int64_t dst) const {
  const int64_t per = slice_chips();
  dst = dst % per + src / per * per;  // the same position in the source's slice
  int h = 0;
  for (int64_t at = src; at != dst; ++h) at = neighbor(at, next_hop(at, dst));
  return h;
}

std::string Torus::chip_label(int64_t chip) const {
  std::vector<int64_t> c = coords(chip);
  std::string s = "chip " + std::to_string(chip) + " (";
  for (size_t i = 0; i < c.size(); ++i) {
    if (i) s += ',';
    s += dim_name(static_cast<int>(i));
    s += '=';
    s += std::to_string(c[i]);
  }
  return s + ")";
}

}  // namespace podsim
