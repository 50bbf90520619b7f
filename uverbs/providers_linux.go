package uverbs

// The providers register themselves with internal/provider by driver id
// when they are initialised; Device.Open looks the device's driver id up
// there. Importing them here gives every program that imports uverbs all
// of them, with no configuration and no import of its own.
import (
	_ "github.com/goverbs/goverbs/provider/mlx5"
	_ "github.com/goverbs/goverbs/provider/rxe"
)
