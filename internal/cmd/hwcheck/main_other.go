//go:build !linux

package main

import "fmt"

func main() { fmt.Println("mlx5 hardware checklist: NOT RUN -- RDMA verbs need Linux") }
