# ddpd's image. By default the GPU image, for the NVIDIA container runtime:
#
#   docker build -t ddpd .
#   docker run -d --gpus all --shm-size=1g -p 127.0.0.1:8080:8080 \
#       -e DDPD_TOKEN=$(openssl rand -hex 16) \
#       -v ddpd-state:/var/lib/ddpd -v /usr/share/datasets:/usr/share/datasets:ro ddpd
#
# The base images are build arguments. NVIDIA's CUDA devel and runtime images (the
# defaults) give the GPU image, with ddp-trainer-nccl; Debian 12 for both gives a
# CPU-only image, for hosts without GPUs (no CUDA toolkit in the build, so no
# ddp-trainer-nccl: a run that asks for nccl is refused, saying why):
#
#   docker build -t ddpd:cpu --build-arg BUILD_IMAGE=debian:12 --build-arg RUNTIME_IMAGE=debian:12-slim .
#
# Two stages. The build stage runs the very steps CI runs: scripts/install-deps.sh
# (DDPD_DEPS=build: what building needs, not the tests' tools), scripts/build.sh
# (without the tests: DDPD_BUILD_TESTS=OFF), then `cmake --install`, whose install()
# rules in CMakeLists.txt alone say which programs and files the image carries. The
# runtime stage has the libraries they link (the same script's --runtime list), what
# was installed, and a user of its own. Inside the container ddpd listens on every interface; publish the port on
# the host's loopback (as above) or behind a proxy. Without DDPD_TOKEN it refuses to
# start, unless told --insecure. tests/integration/docker builds the CPU-only image and runs it.
ARG BUILD_IMAGE=nvidia/cuda:13.0.1-devel-ubuntu24.04
ARG RUNTIME_IMAGE=nvidia/cuda:13.0.1-runtime-ubuntu24.04

FROM ${BUILD_IMAGE} AS build
ENV DDPD_DEPS=build
WORKDIR /src
# The dependency script and what it reads, alone: this layer stays cached while the
# code changes.
COPY scripts/install-deps.sh scripts/install-deps.sh
COPY package.json package-lock.json ./
RUN scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN scripts/build.sh -DDDPD_BUILD_TESTS=OFF -DDDPD_PYTHON_INSTALL_DIR=lib/python3/dist-packages \
 && cmake --install build --prefix /opt/ddpd

FROM ${RUNTIME_IMAGE} AS runtime
COPY scripts/install-deps.sh /tmp/install-deps.sh
RUN /tmp/install-deps.sh --runtime \
 && rm -rf /var/lib/apt/lists/* /tmp/install-deps.sh \
 && groupadd --system --gid 10001 ddpd \
 && useradd --system --uid 10001 --gid ddpd --home-dir /var/lib/ddpd --shell /usr/sbin/nologin ddpd \
 && install -d -o ddpd -g ddpd -m 0700 /var/lib/ddpd \
 && install -d -o ddpd -g ddpd -m 0700 /var/lib/ddpd-runs \
 && install -d -m 0755 /usr/share/datasets
COPY --from=build /opt/ddpd /opt/ddpd
# ddpd runs as its own user, not root; to run each user's runs as that user's account
# (docs/security.md) it holds these capabilities as permitted ones of its
# file, and makes them effective itself: CAP_SETUID, CAP_SETGID (switch accounts),
# CAP_KILL (end runs of other accounts), CAP_CHOWN, CAP_FOWNER (hand a run its
# directory), CAP_DAC_OVERRIDE (serve and delete what runs wrote). Docker's default
# set has them all; with --cap-drop ALL add exactly these (docker-compose.yml does).
RUN setcap cap_setuid,cap_setgid,cap_kill,cap_chown,cap_fowner,cap_dac_override+p /opt/ddpd/bin/ddpd
# Every library each installed program links is here (libcuda comes from the host's
# driver at run time, through the NVIDIA runtime), and each one starts.
RUN for p in /opt/ddpd/bin/*; do \
      if ldd "$p" | grep "not found"; then echo "$p: a library is missing" >&2; exit 1; fi; \
      "$p" --version; \
    done

# PYTHONPATH: `import ddpd` (the reporter) for a python3 added to the image, in a
# command run or not (outside one it is a no-op)
ENV PATH=/opt/ddpd/bin:$PATH \
    PYTHONPATH=/opt/ddpd/lib/python3/dist-packages \
    DDPD_LISTEN=0.0.0.0:8080 \
    DDPD_STATE_DIR=/var/lib/ddpd \
    DDPD_DATA_ROOT=/usr/share/datasets
# The database, the event socket and the runs' directories (checkpoints, logs);
# and the datasets run configs may read (mount them read-only). The runs' directories
# may go to a volume of their own, apart from the database (a runs disk that fills
# never stops it): mount one at /var/lib/ddpd-runs, made for it above, and set
# DDPD_RUNS_DIR=/var/lib/ddpd-runs.
VOLUME ["/var/lib/ddpd", "/usr/share/datasets"]
WORKDIR /var/lib/ddpd
USER 10001:10001
EXPOSE 8080
# (on the port of DDPD_LISTEN, which `docker run -e DDPD_LISTEN=...` may change)
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD curl -fsS -o /dev/null "http://127.0.0.1:${DDPD_LISTEN##*:}/healthz" || exit 1
# SIGTERM: ddpd cancels active runs (SIGTERM, SIGKILL 10 s later) and closes the
# database; give it the time (docker stop -t 30, compose's stop_grace_period).
STOPSIGNAL SIGTERM
# No --listen here: where it listens is DDPD_LISTEN (above, 0.0.0.0:8080), which
# `docker run -e DDPD_LISTEN=...` overrides (a --listen would win over it).
ENTRYPOINT ["ddpd"]
CMD ["serve"]
