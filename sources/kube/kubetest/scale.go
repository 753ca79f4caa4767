package kubetest

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Scale describes a generated world: Services "svc-NNNN" in namespaces
// "scale-NN" (Service i in namespace i % Namespaces), ports 80 "http" and
// 9090 "grpc", each with PodsPerService running, ready pods (IP
// ScalePodIP(i, p)) listed by one EndpointSlice "svc-NNNN-1" (target
// ports 8080 and 9090), as the EndpointSlice controller and kubelets
// would write them.
type Scale struct {
	Services, PodsPerService, Namespaces int
}

// ScaleNames returns Service i's namespace and name.
func ScaleNames(i, namespaces int) (ns, name string) {
	return fmt.Sprintf("scale-%02d", i%namespaces), fmt.Sprintf("svc-%04d", i)
}

// ScalePodIP is pod p of Service i's address.
func ScalePodIP(i, p int) string { return fmt.Sprintf("10.%d.%d.%d", 100+i/250, i%250, p+1) }

// Fill creates the world through the API with 16 writers.
func (c *Cluster) Fill(ctx context.Context, s Scale) error {
	for n := 0; n < s.Namespaces; n++ {
		_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%02d", n)}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	work := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := c.fillService(ctx, s, i); err != nil {
					once.Do(func() { firstErr = err })
				}
			}
		}()
	}
	for i := 0; i < s.Services; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	return firstErr
}

func ptr[T any](v T) *T { return &v }

func (c *Cluster) fillService(ctx context.Context, s Scale, i int) error {
	ns, name := ScaleNames(i, s.Namespaces)
	labels := map[string]string{"app": name}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "grpc", Port: 9090}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}, {Name: ptr("grpc"), Port: ptr(int32(9090))}},
	}
	for p := 0; p < s.PodsPerService; p++ {
		ip := ScalePodIP(i, p)
		pod, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, p), Namespace: ns, Labels: labels},
			Spec:       corev1.PodSpec{ServiceAccountName: name, Containers: []corev1.Container{{Name: "app", Image: "x"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			return err
		}
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name}})
	}
	_, err := c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sl, metav1.CreateOptions{})
	return err
}
