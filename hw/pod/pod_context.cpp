#include "hw/pod/pod_context.h"

#include "sim/common/error.h"

namespace podsim {

int64_t CollectiveGroup::chip_of(int64_t r, const Torus& torus) const {
  std::vector<int64_t> c = coords;
  std::vector<int64_t> rc = shape.coords(r);
  for (size_t i = 0; i < dims.size(); ++i) c[dims[i]] = rc[i];
  return torus.chip(c);
}

CollectiveGroup PodContext::group(int64_t chip, const std::vector<std::string>& axes) const {
  CollectiveGroup g;
  g.coords = torus.coords(chip);
  std::vector<std::string> names = axes.empty() ? plan->mesh.axis_names : axes;
  std::vector<int64_t> rc;
  for (const auto& a : names) {
    int i = plan->mesh.axis_index(a);
    if (i < 0) throw Error(Err::Internal, "collective over unknown mesh axis '" + a + "'");
    int d = plan->mesh.axis_dim[i];
    g.dims.push_back(d);
    g.shape.dims.push_back(torus.dims()[d]);
    g.shape.wrap.push_back(torus.wrap()[d]);
    rc.push_back(g.coords[d]);
  }
  g.rank = g.shape.rank(rc);
  return g;
}

}  // namespace podsim
