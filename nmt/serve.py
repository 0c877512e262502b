"""`python -m nmt.serve ckpt=PATH [backend=ctranslate2] [host=127.0.0.1] [port=8000]`.

Serves the model over HTTP until stopped (Ctrl+C or SIGTERM: requests in flight finish, for
at most drain_seconds, then every process ends): POST
/translate, GET /health, GET /info, a page at /, the API's docs at /docs (nmt.serving). The
default search is the model's own, or the command line's (`decode=beam`,
`decode.beam_size=8`); each request may change its fields.
"""

from __future__ import annotations

import logging
import os
import signal

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from nmt.cli import before_hydra, one_line_errors, setup_logging
from nmt.config import ServeConfig, register_configs

log = logging.getLogger("nmt.serve")
EXAMPLE = "python -m nmt.serve ckpt=outputs/<run>/model.pt port=8000"


def stop_like_ctrl_c() -> None:
    """SIGTERM (kill, systemd, docker stop) stops the server as Ctrl+C does: LitServe's
    shutdown then ends its HTTP process first (uvicorn stops accepting connections and
    finishes the requests in flight, for at most drain_seconds, while the model workers still
    decode them), then the model workers; a bare SIGTERM left them running and holding the
    port. SIGINT gets Python's handler back too, for a server started from a shell that
    ignores it in background jobs. The CTranslate2 server is uvicorn in this process:
    uvicorn's own handlers drain it."""

    server = os.getpid()

    def interrupt(signum, frame):
        if os.getpid() != server:  # a forked worker: the default, as before
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
            return
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def run(cfg: ServeConfig, overrides: list[str]) -> None:
    from nmt.serving.inprocess import InProcessServer
    from nmt.serving.server import build_server, uvicorn_settings

    stop_like_ctrl_c()
    server, line = build_server(cfg, overrides)
    log.info("Serving %s", line)
    log.info("Loading the model; http://%s:%d/health answers ok once ready", cfg.host, cfg.port)
    connections = uvicorn_settings(cfg)
    if isinstance(server, InProcessServer):
        server.run(cfg.host, cfg.port, cfg.log_level, cfg.drain_seconds, connections)
        return
    server.run(
        host=cfg.host,
        port=cfg.port,
        num_api_servers=1,
        log_level=cfg.log_level,
        generate_client_file=False,
        **connections,
    )


register_configs("serve")


@hydra.main(version_base=None, config_path="conf", config_name="serve")
def main(dict_cfg) -> None:
    setup_logging()
    with one_line_errors("nmt.serve", EXAMPLE):
        run(OmegaConf.to_object(dict_cfg), list(HydraConfig.get().overrides.task))


if __name__ == "__main__":
    before_hydra("serve")
    main()
