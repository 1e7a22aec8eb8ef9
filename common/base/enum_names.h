// NameOf: an enum value's name from a table of names in the enum's order,
// for the XxxName() functions that print options, roles and states.
#ifndef NEREUS_COMMON_BASE_ENUM_NAMES_H_
#define NEREUS_COMMON_BASE_ENUM_NAMES_H_

#include <cstddef>

namespace nereus {

// names[i] names the value of E whose number is i; a value outside the table
// gives `unknown`. Pair each table with a static_assert that its size is the
// enum's last value + 1, so a new value cannot go unnamed.
template <typename E, std::size_t N>
constexpr const char* NameOf(E value, const char* const (&names)[N], const char* unknown = "?") {
  const auto i = static_cast<long long>(value);
  return i >= 0 && static_cast<std::size_t>(i) < N ? names[i] : unknown;
}

}  // namespace nereus

#endif  // NEREUS_COMMON_BASE_ENUM_NAMES_H_
