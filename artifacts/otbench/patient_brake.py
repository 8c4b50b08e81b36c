"""An OTBench plug-in (DEE): stop once the margin is <= theta at two boundaries in a row."""


class PatientBrake:
    name = "patient-brake"
    strategy = "dee"                    # dr | fb | dee (docs/rules.md, oracle frontiers)
    signals = ("margin",)               # recorded per-position signals it needs
    theta_range = (-2.0, 12.0)          # --theta-grid N spreads N values here

    def fit(self, train, validation):   # optional: train / validation MeasurementSets
        pass

    def stop(self, view, theta):
        """One bool per still-thinking trajectory at boundary view.k (True = stop)."""
        m = view.history("margin")      # float64[active, k + 1]: nothing after k exists
        low = m[:, -1] <= theta
        if view.k == 0:
            return low
        return low & (m[:, -2] <= theta)
