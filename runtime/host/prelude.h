// Internal to the host backend: the helper code placed at the top of every
// generated translation unit (type aliases f32/s32/pred..., wrapping integer
// arithmetic, XLA's division and conversion rules).
#pragma once

namespace npc::host {

extern const char kPrelude[];

}  // namespace npc::host
