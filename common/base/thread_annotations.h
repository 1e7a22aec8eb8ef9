// Clang's thread-safety annotations
// (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html), after leveldb's
// port/thread_annotations.h. They say which mutex guards a member, which
// functions need it held and which take it; `clang++ -Wthread-safety` checks
// that every access agrees (scripts/thread_safety.sh, run by ctest as
// thread_safety_test). Under other compilers they expand to nothing.
//
// The names carry the NEREUS_ prefix: GUARDED_BY and the rest are defined by
// other projects' headers too (leveldb, Chromium, older abseil), and a
// dependency that brings such a header in must not redefine ours.
//
// Only nereus::Mutex (common/base/mutex.h) is annotated as a capability;
// libstdc++'s std::mutex is not, so members guarded by a std::mutex cannot be
// checked.
#ifndef NEREUS_COMMON_BASE_THREAD_ANNOTATIONS_H_
#define NEREUS_COMMON_BASE_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define NEREUS_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define NEREUS_THREAD_ANNOTATION_(x)  // Only clang checks them.
#endif

// On a data member: reading or writing it needs mutex `x` held.
#define NEREUS_GUARDED_BY(x) NEREUS_THREAD_ANNOTATION_(guarded_by(x))

// On a pointer member: what it points to needs `x` held (the pointer itself
// does not).
#define NEREUS_PT_GUARDED_BY(x) NEREUS_THREAD_ANNOTATION_(pt_guarded_by(x))

// On a mutex member: the order in which mutexes are taken (checked only with
// -Wthread-safety-beta).
#define NEREUS_ACQUIRED_AFTER(...) NEREUS_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#define NEREUS_ACQUIRED_BEFORE(...) NEREUS_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))

// On a function: its callers must hold the mutexes exclusively / at least
// shared.
#define NEREUS_EXCLUSIVE_LOCKS_REQUIRED(...) NEREUS_THREAD_ANNOTATION_(exclusive_locks_required(__VA_ARGS__))
#define NEREUS_SHARED_LOCKS_REQUIRED(...) NEREUS_THREAD_ANNOTATION_(shared_locks_required(__VA_ARGS__))

// On a function: its callers must not hold the mutexes (it takes them).
#define NEREUS_LOCKS_EXCLUDED(...) NEREUS_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))

// On a function returning a mutex (or a reference to one): which one.
#define NEREUS_LOCK_RETURNED(x) NEREUS_THREAD_ANNOTATION_(lock_returned(x))

// On a class: its objects are mutexes. CAPABILITY names the kind in messages.
#define NEREUS_LOCKABLE NEREUS_THREAD_ANNOTATION_(lockable)
#define NEREUS_CAPABILITY(x) NEREUS_THREAD_ANNOTATION_(capability(x))

// On a class: an RAII object that holds a mutex from its constructor to its
// destructor.
#define NEREUS_SCOPED_LOCKABLE NEREUS_THREAD_ANNOTATION_(scoped_lockable)

// On a function: it acquires / releases the mutexes (without arguments: the
// object it is called on).
#define NEREUS_EXCLUSIVE_LOCK_FUNCTION(...) NEREUS_THREAD_ANNOTATION_(exclusive_lock_function(__VA_ARGS__))
#define NEREUS_UNLOCK_FUNCTION(...) NEREUS_THREAD_ANNOTATION_(unlock_function(__VA_ARGS__))

// On a function: it checks (at run time) that the mutex is held; the analysis
// takes it as held afterwards.
#define NEREUS_ASSERT_EXCLUSIVE_LOCK(...) NEREUS_THREAD_ANNOTATION_(assert_exclusive_lock(__VA_ARGS__))

// On a function: not analysed. Say why wherever it is used.
#define NEREUS_NO_THREAD_SAFETY_ANALYSIS NEREUS_THREAD_ANNOTATION_(no_thread_safety_analysis)

#endif  // NEREUS_COMMON_BASE_THREAD_ANNOTATIONS_H_
