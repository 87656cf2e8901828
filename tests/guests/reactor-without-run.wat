;; A reactor that exports no `run`: the run ends as a trapped outcome naming `run`.
(module
  (func (export "_initialize")))
