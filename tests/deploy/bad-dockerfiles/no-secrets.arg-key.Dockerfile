# A deliberately broken Dockerfile: scripts/check-dockerfile.sh must reject it
# with rule no-secrets.
FROM debian:12.8-slim AS build
RUN echo build > /artifact

FROM debian:12.8-slim
COPY --from=build /artifact /artifact
ARG SIGNING_KEY=abc123
USER 10001:10001
ENTRYPOINT ["ibus", "run"]
