import { RideApiError, RideClient } from "@ride/sdk";

const ride = new RideClient({ apiKey: process.env.RIDE_API_KEY!, baseUrl: process.env.RIDE_BASE_URL ?? "http://localhost:3000" });
const pickup = { lat: 12.9716, lng: 77.5946, address: "MG Road" };
const drop = { lat: 12.9352, lng: 77.6245 };

// Quote a cab, then book it at that fare (retries reuse one Idempotency-Key: never two rides).
const { quotes } = await ride.fareEstimate({ pickup, drop, serviceType: "cab" });
const order = await ride.createOrder({
	user: { name: "Asha Rao", phone: "+919812345678" },
	serviceType: "cab",
	pickup,
	drop,
	quoteId: quotes[0].quoteId,
	webhookURL: process.env.RIDE_WEBHOOK_URL ?? "https://partner.example.com/hooks/rides",
	metadata: { partnerRef: "booking-8812" },
});
console.log(`booked ${order.orderId}: ${order.status}, ${order.fare.totalAmount} ${order.fare.currency}`);

// Every webhook event of the ride so far, with its delivery state, page after page.
for await (const event of ride.events({ orderId: order.orderId })) console.log(`#${event.sequence} ${event.status}: ${event.delivery.state}`);

// Cancel it; an error answer is a RideApiError with the error table's code.
try {
	const { status } = await ride.cancel({ orderId: order.orderId, reason: "changed plans" });
	console.log(`${order.orderId} is ${status}`);
} catch (err) {
	if (err instanceof RideApiError) console.error(`${err.status} ${err.code} (request ${err.requestId})`);
	throw err;
}
