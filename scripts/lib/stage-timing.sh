# Sourced by scripts/test.sh: `stage NAME COMMAND...` runs COMMAND and records how long it
# took; the breakdown is printed when the script exits, pass or fail, and written to
# ${build_dir}/test-times.txt so that a run's note can quote it.
stage_lines=()
stage_started=$SECONDS

stage() {
  local name=$1 start=$SECONDS rc=0
  shift
  echo "== stage $name"
  "$@" || rc=$?
  local line
  line=$(printf '  %-18s %5d s' "$name" $((SECONDS - start)))
  [ $rc -eq 0 ] || line+=" (failed, exit $rc)"
  stage_lines+=("$line")
  return $rc
}

# slowest_tests BUILD_DIR LABEL: the ten longest tests of the last ctest run in BUILD_DIR,
# from ctest's own timings, added to the breakdown.
slowest_tests() {
  local log="$1/Testing/Temporary/LastTest.log"
  [ -f "$log" ] || return 0
  stage_lines+=("  slowest of $2:")
  while IFS= read -r line; do stage_lines+=("    $line"); done < <(
    awk '/^[0-9]+\/[0-9]+ Test: /{name=$3} /^"[^"]*" end time/{next}
         /^Test time = /{printf "%8.1f s  %s\n", $4, name}' "$log" | sort -rn | head -10)
}

print_stage_times() {
  local rc=$?
  {
    echo "== test.sh stage times"
    printf '%s\n' "${stage_lines[@]}"
    printf '  %-18s %5d s\n' total $((SECONDS - stage_started))
  } | tee "${build_dir:-build}/test-times.txt" >&2
  return $rc
}
trap print_stage_times EXIT
