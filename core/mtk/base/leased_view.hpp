#pragma once
// A View of a range of an arena with a use count of its own. A subview shares its parent's count,
// so a pool that hands out ranges of one allocation as subviews cannot tell which range is free;
// a leased view counts only its own copies (use_count() == 1: the pool's copy alone) and keeps the
// whole arena alive while any copy lives, so a range held past a plan's drop stays valid.
//
// Built the way Kokkos builds a managed View (an allocation record with a destroy functor): the
// record holds no memory of its own, only a reference to the arena, released when the last copy
// of the lease goes. Kokkos::Impl's record API, stable from Kokkos 3.4 through 4.x.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>

namespace mtk {

namespace impl {

template <class ArenaView>
struct ArenaReference {
  ArenaView arena;
  void destroy_shared_allocation() { arena = ArenaView(); }
};

}  // namespace impl

/// Elements [offset, offset + n) of `arena`, as a View with its own use count (labelled `label`)
/// that keeps `arena` allocated while it or a copy lives.
template <class T>
Kokkos::View<T*> leased_view(const Kokkos::View<T*>& arena, std::int64_t offset, std::int64_t n,
                             const std::string& label) {
  // A record of the arena's own memory space (its header holds the label there), as Kokkos
  // reads a View's label through the record of that space.
  using Space = typename Kokkos::View<T*>::memory_space;
  using Record =
      Kokkos::Impl::SharedAllocationRecord<Space, impl::ArenaReference<Kokkos::View<T*>>>;
  Record* record = Record::allocate(Space(), label, 0);
  record->m_destroy.arena = arena;
  Kokkos::Impl::SharedAllocationTracker track;
  track.assign_allocated_record_to_uninitialized(record);
  const Kokkos::View<T*, typename Kokkos::View<T*>::device_type,
                     Kokkos::MemoryTraits<Kokkos::Unmanaged>>
      range(arena.data() + offset, static_cast<size_t>(n));
  return Kokkos::View<T*>(track, range.impl_map());
}

}  // namespace mtk
