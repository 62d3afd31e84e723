// The simulated pod: one Chip per torus position and the ICI links between them. Built once per process (SystemC
// elaborates once); the engine (sim/engine) runs it and reads the chips' logs afterwards.
// When the step repeats under translations of the torus (hw/pod/symmetry.h), only one box of chips is built: a
// link leaving the box leads to the box's chip on the other side and moves the messages it carries back by one
// period; chips() still has one entry per torus position, each the chip that stands for it.
#pragma once

#include <memory>
#include <vector>

#include "hw/chip/chip.h"
#include "hw/ici/router.h"
#include "hw/pod/pod_context.h"
#include "hw/pod/symmetry.h"

namespace podsim {

class Pod {
 public:
  explicit Pod(PodContext& ctx);

  // Per torus position, the chip simulated for it (itself unless the pod is reduced by symmetry).
  const std::vector<Chip*>& chips() const { return m_view; }
  // The chips actually simulated.
  const std::vector<std::unique_ptr<Chip>>& simulated() const { return m_chips; }
  const std::vector<IciLink>& links() const { return m_links; }
  const PodSymmetry& symmetry() const { return m_symmetry; }
  // The data-center network between slices (null with one slice).
  const DcnNetwork* dcn() const { return m_dcn.get(); }

 private:
  PodContext& m_ctx;
  PodSymmetry m_symmetry;
  std::vector<std::unique_ptr<Chip>> m_chips;
  std::vector<Chip*> m_view;
  std::vector<IciLink> m_links;
  std::unique_ptr<DcnNetwork> m_dcn;
};

}  // namespace podsim
