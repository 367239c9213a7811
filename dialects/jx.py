from xdsl.ir import Dialect
JX = Dialect("jx", [], [])
