# How every gtest binary of tests/ becomes ctest tests: one call that gives each test its
# labels and a time limit from the label table below, and that leaves out of the build a
# binary none of whose labels the tree runs (KERNELEVAL_TEST_LABELS).
#
#   kerneleval_discover_tests(TARGET LABELS label... [TIMEOUT seconds] [TEST_PREFIX prefix])
#
# The limit is per test (one gtest case): the largest of its labels' limits unless TIMEOUT
# names one. A test that passes its limit fails as "Timeout" instead of holding the run: a
# hang then costs minutes, not the whole CI budget. The limits are several times what the
# slowest test of each label takes on a busy 2-core machine (build/test-times.txt).
include(GoogleTest)

set(KERNELEVAL_TEST_LABELS "" CACHE STRING
    "Labels whose test binaries this tree builds (empty: all). A sanitizer or fuzz tree that \
runs some labels builds only those tests; the tools and helper libraries build regardless.")

set(KERNELEVAL_TEST_TIMEOUT_SCALE 1 CACHE STRING
    "Factor on every test's time limit: a sanitizer tree, whose code runs several times \
slower, raises it.")

set(_kerneleval_label_timeouts
    unit=60 integration=300 robustness=300 security=300 store=300 deploy=300 load=600 gpu=600)

function(_kerneleval_label_timeout label out)
  set(seconds 300)
  foreach(pair IN LISTS _kerneleval_label_timeouts)
    string(REPLACE "=" ";" kv "${pair}")
    list(GET kv 0 name)
    if(name STREQUAL label)
      list(GET kv 1 seconds)
    endif()
  endforeach()
  set(${out} ${seconds} PARENT_SCOPE)
endfunction()

function(kerneleval_discover_tests target)
  cmake_parse_arguments(arg "" "TIMEOUT;TEST_PREFIX" "LABELS" ${ARGN})
  if(NOT arg_LABELS)
    message(FATAL_ERROR "kerneleval_discover_tests(${target}): LABELS is required")
  endif()

  set(wanted FALSE)
  foreach(label IN LISTS arg_LABELS)
    kerneleval_tree_runs(${label} runs)
    if(runs)
      set(wanted TRUE)
    endif()
  endforeach()
  if(NOT wanted)
    # Not built, and not registered: an unbuilt binary would show as a failing *_NOT_BUILT.
    set_target_properties(${target} PROPERTIES EXCLUDE_FROM_ALL ON)
    return()
  endif()

  set(timeout ${arg_TIMEOUT})
  if(NOT timeout)
    set(timeout 0)
    foreach(label IN LISTS arg_LABELS)
      _kerneleval_label_timeout(${label} seconds)
      if(seconds GREATER timeout)
        set(timeout ${seconds})
      endif()
    endforeach()
  endif()

  math(EXPR timeout "${timeout} * ${KERNELEVAL_TEST_TIMEOUT_SCALE}")

  set(prefix)
  if(arg_TEST_PREFIX)
    set(prefix TEST_PREFIX ${arg_TEST_PREFIX})
  endif()
  gtest_discover_tests(${target} ${prefix} DISCOVERY_TIMEOUT 60
                       PROPERTIES LABELS "${arg_LABELS}" TIMEOUT ${timeout})
endfunction()

# Whether this tree runs tests labelled `label` (KERNELEVAL_TEST_LABELS empty: every label),
# for an area whose tests are not gtest binaries to leave its programs out of the build.
function(kerneleval_tree_runs label out)
  if(NOT KERNELEVAL_TEST_LABELS OR label IN_LIST KERNELEVAL_TEST_LABELS)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()
