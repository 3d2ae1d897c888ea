"""`kernel test`: which of upstream's kernel tests apply to a wheel on this host, run one file per process."""
