"""Application services over the ports (``Services``, ``TokenService``, job apply and
enqueue), and the ``Settings`` record every process is built from. Which adapters a process
uses is decided by the wiring (``tickwork.serve``), not here."""
