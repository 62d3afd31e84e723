// The simulated pod: one Chip per torus position and the ICI links between them. Built once per process (SystemC
// elaborates once); the engine (sim/engine) runs it and reads the chips' logs afterwards.
#pragma once

#include <memory>
#include <vector>

#include "hw/chip/chip.h"
#include "hw/ici/router.h"
#include "hw/pod/pod_context.h"

namespace podsim {

class Pod {
 public:
  explicit Pod(PodContext& ctx);

  std::vector<std::unique_ptr<Chip>>& chips() { return m_chips; }
  const std::vector<std::unique_ptr<Chip>>& chips() const { return m_chips; }
  const std::vector<IciLink>& links() const { return m_links; }

 private:
  PodContext& m_ctx;
  std::vector<std::unique_ptr<Chip>> m_chips;
  std::vector<IciLink> m_links;
};

}  // namespace podsim
