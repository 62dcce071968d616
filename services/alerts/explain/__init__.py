"""What an alert says about itself: its figures in words, the version changes around its onset, the issues that
account for its excess failing claims, and whether its rise holds on the calibrated rate."""
